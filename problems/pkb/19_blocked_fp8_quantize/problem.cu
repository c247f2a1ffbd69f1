// pkb/19_blocked_fp8_quantize (ParallelKernelBench 19): every rank quantizes its bf16 x (M x N)
// to fp8 e4m3 in blocks of 128 consecutive elements, one fp32 scale per block, then every rank
// gathers all ranks' values and scales (rank r's rows at [r*M, (r+1)*M)).
//
// PKB's quantizer is a Triton kernel, whose fp32 '/' is PTX div.full.f32 (approximate, not
// IEEE) and whose fp8 store is cvt.rn.satfinite; both are reproduced exactly here.
#include "pk_problem_module.h"

#include <cuda_bf16.h>
#include <cuda_fp8.h>

typedef int (*entry_fn)(const pk_ctx *, const __nv_bfloat16 *, __nv_fp8_e4m3 *, float *, size_t,
                        size_t);

#define BLOCK 128 // elements per scale
#define THREADS 256

// Triton's fp32 division.
__device__ __forceinline__ float div_full(float a, float b) {
    float r;
    asm("div.full.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}

// One warp per 128-element block, 4 consecutive elements per lane:
//   s = max|x| / 448, y = e4m3_satfinite(x / (s == 0 ? 1 : s)), both divisions div.full.f32.
__global__ void __launch_bounds__(THREADS)
    quantize(const __nv_bfloat16 *x, __nv_fp8_e4m3 *y, float *s, size_t nblocks) {
    const int lane = threadIdx.x % 32;
    const size_t warps = (size_t)gridDim.x * (THREADS / 32);
    for (size_t b = ((size_t)blockIdx.x * THREADS + threadIdx.x) / 32; b < nblocks; b += warps) {
        const uint2 raw = reinterpret_cast<const uint2 *>(x + b * BLOCK)[lane];
        const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&raw);
        const float2 lo = __bfloat1622float2(h[0]), hi = __bfloat1622float2(h[1]);
        float amax = fmaxf(fmaxf(fabsf(lo.x), fabsf(lo.y)), fmaxf(fabsf(hi.x), fabsf(hi.y)));
        for (int off = 16; off > 0; off >>= 1)
            amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
        const float sc = div_full(amax, 448.0f);
        const float safe = sc == 0.0f ? 1.0f : sc;
        const __nv_fp8x2_storage_t q0 = __nv_cvt_float2_to_fp8x2(
            make_float2(div_full(lo.x, safe), div_full(lo.y, safe)), __NV_SATFINITE, __NV_E4M3);
        const __nv_fp8x2_storage_t q1 = __nv_cvt_float2_to_fp8x2(
            make_float2(div_full(hi.x, safe), div_full(hi.y, safe)), __NV_SATFINITE, __NV_E4M3);
        reinterpret_cast<uint32_t *>(y + b * BLOCK)[lane] = (uint32_t)q0 | ((uint32_t)q1 << 16);
        if (lane == 0)
            s[b] = sc;
    }
}

// Baseline: the quantizer writes this rank's rows of y and s in place, then two host-driven
// in-place NCCL all-gathers (values as bytes, then scales), as PKB's solution() does.
static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const size_t M = (size_t)call->dims[0], N = (size_t)call->dims[1];
    const size_t chunk = M * N, nblocks = chunk / BLOCK, r = (size_t)ctx->rank;
    __nv_fp8_e4m3 *y = static_cast<__nv_fp8_e4m3 *>(call->args[1]);
    float *s = static_cast<float *>(call->args[2]);
    const size_t ctas = (nblocks + THREADS / 32 - 1) / (THREADS / 32);
    quantize<<<(unsigned)ctas, THREADS, 0, ctx->stream>>>(
        static_cast<const __nv_bfloat16 *>(call->args[0]), y + r * chunk, s + r * nblocks, nblocks);
    if (cudaGetLastError() != cudaSuccess)
        return 2000;
    ncclResult_t e = ncclAllGather(y + r * chunk, y, chunk, ncclUint8, ctx->comm, ctx->stream);
    if (e == ncclSuccess)
        e = ncclAllGather(s + r * nblocks, s, nblocks, ncclFloat32, ctx->comm, ctx->stream);
    return e == ncclSuccess ? 0 : 1000 + (int)e;
}

static int invoke(void *fn, const pk_problem_call *c) {
    if (!fn || c->n_args != 3 || c->n_dims < 2)
        return -1;
    return reinterpret_cast<entry_fn>(fn)(c->ctx, static_cast<const __nv_bfloat16 *>(c->args[0]),
                                          static_cast<__nv_fp8_e4m3 *>(c->args[1]),
                                          static_cast<float *>(c->args[2]), (size_t)c->dims[0],
                                          (size_t)c->dims[1]);
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, invoke, NULL, NULL, NULL, NULL};
    return &module;
}
