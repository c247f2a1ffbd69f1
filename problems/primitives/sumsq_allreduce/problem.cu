// primitives/sumsq_allreduce: y[r] = sum over ranks and columns of x[r, c]^2, accumulated in
// fp32. Each rank holds its own `cols` columns of every row (a hidden dim sharded across
// ranks, as in tensor-parallel RMSNorm).
#include "pk_problem_module.h"

#include <cuda_bf16.h>

typedef int (*entry_fn)(const pk_ctx *, const __nv_bfloat16 *, float *, size_t, size_t);

#define THREADS 256

// One CTA per row: each thread sums a strided part of the row in fp32, then a tree over the
// CTA (warp shuffles, then shared memory), also in fp32.
__global__ void __launch_bounds__(THREADS)
    row_sumsq(const __nv_bfloat16 *x, float *y, size_t cols) {
    const __nv_bfloat16 *row = x + (size_t)blockIdx.x * cols;
    float acc = 0.f;
    for (size_t c = threadIdx.x; c < cols; c += THREADS) {
        float v = __bfloat162float(row[c]);
        acc = fmaf(v, v, acc);
    }
    for (int off = 16; off > 0; off >>= 1)
        acc += __shfl_xor_sync(0xffffffffu, acc, off);
    __shared__ float warp_sums[THREADS / 32];
    if (threadIdx.x % 32 == 0)
        warp_sums[threadIdx.x / 32] = acc;
    __syncthreads();
    if (threadIdx.x < 32) {
        acc = threadIdx.x < THREADS / 32 ? warp_sums[threadIdx.x] : 0.f;
        for (int off = 16; off > 0; off >>= 1)
            acc += __shfl_xor_sync(0xffffffffu, acc, off);
        if (threadIdx.x == 0)
            y[blockIdx.x] = acc;
    }
}

// Baseline: the local sums, then one host-driven NCCL all-reduce of them, in place.
static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const size_t rows = (size_t)call->dims[0], cols = (size_t)call->dims[1];
    float *y = static_cast<float *>(call->args[1]);
    row_sumsq<<<(unsigned)rows, THREADS, 0, ctx->stream>>>(
        static_cast<const __nv_bfloat16 *>(call->args[0]), y, cols);
    if (cudaGetLastError() != cudaSuccess)
        return 2000;
    ncclResult_t r = ncclAllReduce(y, y, rows, ncclFloat, ncclSum, ctx->comm, ctx->stream);
    return r == ncclSuccess ? 0 : 1000 + (int)r;
}

static int invoke(void *fn, const pk_problem_call *c) {
    if (!fn || c->n_args != 2 || c->n_dims < 2)
        return -1;
    return reinterpret_cast<entry_fn>(fn)(c->ctx, static_cast<const __nv_bfloat16 *>(c->args[0]),
                                          static_cast<float *>(c->args[1]), (size_t)c->dims[0],
                                          (size_t)c->dims[1]);
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, invoke, NULL, NULL, NULL, NULL};
    return &module;
}
