#!/usr/bin/env bash
# Runs bench/throughput/init_probe under start-up variants, 3 times each (GPU machine).
set -u
cd "$(dirname "$0")"
nvcc -O2 -arch=sm_90a -o /tmp/init_probe init_probe.cu -lnccl || exit 1
export NCCL_NVLS_ENABLE=0
nvidia-smi topo -m 2>/dev/null | head -4
NCCL_TOPO_DUMP_FILE=/tmp/topo.xml /tmp/init_probe 2 >/dev/null 2>&1
for v in "default:" "runtime_connect=1:NCCL_RUNTIME_CONNECT=1" "runtime_connect=0:NCCL_RUNTIME_CONNECT=0" \
         "lazy modules:CUDA_MODULE_LOADING=LAZY" "eager modules:CUDA_MODULE_LOADING=EAGER" \
         "topo file:NCCL_TOPO_FILE=/tmp/topo.xml" \
         "all three:NCCL_RUNTIME_CONNECT=1 CUDA_MODULE_LOADING=LAZY NCCL_TOPO_FILE=/tmp/topo.xml" \
         "exit without teardown:PROBE_NO_TEARDOWN=1"; do
    name=${v%%:*} envs=${v#*:}
    for i in 1 2 3; do
        echo "== $name ($i)"
        env $envs /tmp/init_probe 2 512
    done
done
