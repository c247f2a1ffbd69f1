#!/bin/sh
# "device_api" (issue 30): with the harness's nvcc flags, a candidate that names ctx->dev_comm
# or NCCL's device API through pk_ctx.h compiles only with -DPK_DEVICE_API=1 (what compile.c adds
# for problems with "device_api": true); a host-API candidate compiles either way. No GPU needed.
set -u
: "${PK_SOURCE_DIR:?set by ctest}"
NVCC=${PK_NVCC:-/usr/local/cuda/bin/nvcc}
[ -x "$NVCC" ] || { echo "nvcc not found at $NVCC"; exit 1; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
cat >"$T/dev.cu" <<'CU'
#include "pk_ctx.h"
__global__ void k(ncclDevComm c) { (void)c; }
extern "C" int solution(const pk_ctx *ctx) {
    k<<<1, 1, 0, ctx->stream>>>(ctx->dev_comm);
    return 0;
}
CU
cat >"$T/host.cu" <<'CU'
#include "pk_ctx.h"
extern "C" int solution(const pk_ctx *ctx, float *x, size_t n) {
    return ncclAllReduce(x, x, n, ncclFloat, ncclSum, ctx->comm, ctx->stream) != ncclSuccess;
}
CU
# compile.c's gpu_flags, host -O0 (no diagnostics change, less time)
cc() { "$NVCC" -shared -Xcompiler -fPIC -O0 -std=c++17 -gencode arch=compute_90a,code=sm_90a \
    -cudart shared "-I$PK_SOURCE_DIR/problems/include/candidate" "$@" >"$T/log" 2>&1; }
fail=0
expect() { # expect ok|error FILE [FLAGS]
    want=$1 src=$2
    shift 2
    if cc "$@" "$T/$src" -o "$T/out.so"; then got=ok; else got=error; fi
    if [ "$got" = "$want" ]; then
        echo "ok      $src $* -> $got"
    else
        echo "FAILED  $src $* -> $got, expected $want"
        cat "$T/log"
        fail=1
    fi
}
expect error dev.cu
expect ok dev.cu -DPK_DEVICE_API=1
expect ok host.cu
expect ok host.cu -DPK_DEVICE_API=1
exit $fail
