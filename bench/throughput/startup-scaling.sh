#!/usr/bin/env bash
# Does GPU job start-up scale with concurrency? (issue #13; GPU machine, 2 GPUs.) Starts K
# copies of bench/throughput/init_probe at once (each: 2 ranks, CUDA context, NCCL comm, arena,
# first all-reduce, exit without teardown as pk-runner does) for K = 1 2 4 8 16, bare and inside
# `pkgym sandbox --gpus 0,1`, and prints per K: the wall until all finished, pairs per second,
# and the median per-rank CUDA-context and NCCL-init times. If start-up were independent per
# process, pairs/s would grow with K; if the driver serializes it, it stays flat.
#   bench/throughput/startup-scaling.sh [PKGYM]        (KS="1 2 4 8 16", REPS=2, MODES="bare sandbox")
# PROBE_OWN_GPU=1 (each rank sees only its GPU) and PROBE_NO_DEV_COMM=1 pass on to the probe,
# inside the sandbox too.
set -u
here=$(cd "$(dirname "$0")" && pwd)
pkgym=${1:-$here/../../build-gpu/env/pkgym}
bin=$(mktemp -d /tmp/pk-scaling.XXXXXX)
trap 'rm -rf "$bin"' EXIT
# PROBE_BIN: an init_probe built already (saves the compile when called repeatedly).
if [ -n "${PROBE_BIN:-}" ]; then
    cp "$PROBE_BIN" "$bin/init_probe" || exit 1
else
    nvcc -O2 -arch=sm_90a -o "$bin/init_probe" "$here/init_probe.cu" -lnccl || exit 1
fi
export NCCL_NVLS_ENABLE=0 PROBE_NO_TEARDOWN=1
probe() { # MODE OUTFILE
    if [ "$1" = sandbox ]; then
        "$pkgym" sandbox --gpus 0,1 --wall-ms 120000 --ro "$bin" --env PROBE_NO_TEARDOWN=1 \
            ${PROBE_OWN_GPU:+--env PROBE_OWN_GPU=1} ${PROBE_NO_DEV_COMM:+--env PROBE_NO_DEV_COMM=1} \
            -- "$bin/init_probe" 2 512 | python3 -c 'import json,sys; print(json.load(sys.stdin)["stdout"])' >"$2" 2>&1
    else
        "$bin/init_probe" 2 512 >"$2" 2>&1
    fi
}
echo "| mode | K pairs at once | wall s | pairs/s | cuda context ms (median, max) | nccl init ms (median, max) | failed |"
echo "|---|---|---|---|---|---|---|"
for mode in ${MODES:-bare sandbox}; do
    for k in ${KS:-1 2 4 8 16}; do
        for rep in $(seq "${REPS:-2}"); do
            rm -f "$bin"/out.*
            t0=$(date +%s.%N)
            for i in $(seq "$k"); do probe "$mode" "$bin/out.$i" & done
            wait
            t1=$(date +%s.%N)
            python3 - "$mode" "$k" "$t0" "$t1" "$bin"/out.* <<'PY'
import statistics, sys
mode, k, t0, t1, files = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), sys.argv[5:]
ctx, nccl, failed = [], [], 0
for f in files:
    text = open(f).read()
    if "rank 0" not in text or "failed" in text:
        failed += 1
    for line in text.splitlines():
        if line.startswith("cuda context"):
            ctx += [float(x) for x in line.split()[2:]]
        elif line.startswith("nccl comm init"):
            nccl += [float(x) for x in line.split()[3:]]
wall = t1 - t0
fmt = lambda v: "%.0f, %.0f" % (statistics.median(v), max(v)) if v else "-"
print("| %s | %d | %.2f | %.2f | %s | %s | %d |" % (mode, k, wall, k / wall, fmt(ctx), fmt(nccl), failed))
PY
        done
    done
done
