// Shortcut twin (issue #26), incorrect: skips the third all-reduce. fc1_1_out and fc1_2_out
// are reduced as in correct.cu; fc2_out is this rank's own grad_fc2_lora_B times W ("one rank's
// gradient stands for the sum"), a third less NVLink traffic. It is wrong element by element on
// every input, PKB's i.i.d. ones included (a sum of W independent draws is not W x one of
// them); under every regime but iid the ranks are also scaled apart, so it is off by about the
// output's rms. Must be incorrect in trial 0.
#include "pk_ctx.h"

#include <cuda/atomic>

#define THREADS 512

struct Tensors {
    size_t in_off[3], out_off[3], n[3]; // arena offsets and element counts
};

__device__ __forceinline__ void add8(float *acc, const uint4 &v) {
    const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&v);
#pragma unroll
    for (int j = 0; j < 4; j++) {
        const float2 f = __bfloat1622float2(h[j]);
        acc[2 * j] += f.x;
        acc[2 * j + 1] += f.y;
    }
}

__global__ void __launch_bounds__(THREADS)
    allreduce3(ncclDevComm comm, ncclWindow_t win, Tensors a, int rank, int world) {
    __shared__ const uint4 *src[3][PK_MAX_RANKS];
    __shared__ uint4 *dst[3][PK_MAX_RANKS];
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           blockIdx.x);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    if (threadIdx.x < 3 * world) {
        const int t = threadIdx.x / world, q = threadIdx.x % world;
        src[t][q] = static_cast<const uint4 *>(ncclGetLsaPointer(win, a.in_off[t], q));
        dst[t][q] = static_cast<uint4 *>(ncclGetLsaPointer(win, a.out_off[t], q));
    }
    __syncthreads();
    for (int t = 0; t < 3; t++) {
        if (t == 2) { // SHORTCUT: no exchange, W x the local gradient, every element locally
            const __nv_bfloat16 *x = reinterpret_cast<const __nv_bfloat16 *>(src[2][rank]);
            __nv_bfloat16 *y = reinterpret_cast<__nv_bfloat16 *>(dst[2][rank]);
            for (size_t e = (size_t)blockIdx.x * THREADS + threadIdx.x; e < a.n[2];
                 e += (size_t)gridDim.x * THREADS)
                y[e] = __float2bfloat16_rn((float)world * __bfloat162float(x[e]));
            continue;
        }
        const size_t V = a.n[t] / 8, lo = V * rank / world, hi = V * (rank + 1) / world;
        for (size_t i = lo + (size_t)blockIdx.x * THREADS + threadIdx.x; i < hi;
             i += (size_t)gridDim.x * THREADS) {
            uint4 v[PK_MAX_RANKS];
#pragma unroll
            for (int q = 0; q < PK_MAX_RANKS; q++)
                if (q < world)
                    v[q] = src[t][q][i];
            float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
#pragma unroll
            for (int q = 0; q < PK_MAX_RANKS; q++)
                if (q < world)
                    add8(acc, v[q]);
            uint4 o;
            __nv_bfloat162 *h = reinterpret_cast<__nv_bfloat162 *>(&o);
#pragma unroll
            for (int j = 0; j < 4; j++)
                h[j] = __floats2bfloat162_rn(acc[2 * j], acc[2 * j + 1]);
            for (int q = 0; q < world; q++)
                dst[t][q][i] = o;
        }
        const size_t tail = a.n[t] % 8;
        if (rank == 0 && blockIdx.x == 0 && threadIdx.x < tail) {
            const size_t e = V * 8 + threadIdx.x;
            float s = 0.f;
            for (int q = 0; q < world; q++)
                s += __bfloat162float(reinterpret_cast<const __nv_bfloat16 *>(src[t][q])[e]);
            for (int q = 0; q < world; q++)
                reinterpret_cast<__nv_bfloat16 *>(dst[t][q])[e] = __float2bfloat16_rn(s);
        }
    }
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
}

extern "C" int solution(const pk_ctx *ctx, const __nv_bfloat16 *grad_fc1_1_lora_A,
                        const __nv_bfloat16 *grad_fc1_2_lora_A,
                        const __nv_bfloat16 *grad_fc2_lora_B, __nv_bfloat16 *fc1_1_out,
                        __nv_bfloat16 *fc1_2_out, __nv_bfloat16 *fc2_out, size_t r, size_t in_f,
                        size_t out_f) {
    const void *in[3] = {grad_fc1_1_lora_A, grad_fc1_2_lora_A, grad_fc2_lora_B};
    const void *out[3] = {fc1_1_out, fc1_2_out, fc2_out};
    Tensors a;
    for (int t = 0; t < 3; t++) {
        if (((uintptr_t)in[t] | (uintptr_t)out[t]) % 16 != 0)
            return 1; // whole 16-byte vectors
        a.in_off[t] = pk_sym_offset(ctx, in[t]);
        a.out_off[t] = pk_sym_offset(ctx, out[t]);
    }
    a.n[0] = a.n[1] = r * in_f;
    a.n[2] = out_f * r;
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device) != cudaSuccess)
        return 2;
    // Every CTA waits for its twin on each peer: all must be resident, one LSA barrier each.
    const int grid = sms < ctx->lsa_barrier_count ? sms : ctx->lsa_barrier_count;
    if (grid < 1)
        return 3;
    allreduce3<<<grid, THREADS, 0, ctx->stream>>>(ctx->dev_comm, ctx->window, a, ctx->rank,
                                                  ctx->world_size);
    return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
