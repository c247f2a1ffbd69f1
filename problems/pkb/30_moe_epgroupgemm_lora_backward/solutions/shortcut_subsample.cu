// Shortcut twin (issue #26), incorrect: reduces a subsample. Of every gradient only the even
// 16-byte vectors are all-reduced (half the NVLink traffic); each odd vector is W x this rank's
// own, written locally. Wrong element by element on every input (PKB's i.i.d. ones included);
// under the rank, row, heavy and peaked regimes the ranks are scaled apart as well. Must be
// incorrect in trial 0.
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
        const size_t V = a.n[t] / 8, lo = V * rank / world, hi = V * (rank + 1) / world;
        for (size_t i = lo + (size_t)blockIdx.x * THREADS + threadIdx.x; i < hi;
             i += (size_t)gridDim.x * THREADS) {
            uint4 v[PK_MAX_RANKS];
            const bool sampled = i % 2 == 0; // SHORTCUT: odd vectors are not exchanged
#pragma unroll
            for (int q = 0; q < PK_MAX_RANKS; q++)
                if (q < world)
                    v[q] = src[t][sampled ? q : rank][i];
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
                if (sampled || q == rank)
                    dst[t][q][i] = o;
        }
        for (size_t i = (size_t)blockIdx.x * THREADS + threadIdx.x; i < V;
             i += (size_t)gridDim.x * THREADS) {
            if (i % 2 == 0 || (i >= lo && i < hi))
                continue; // even vectors: exchanged above; odd ones of our slice: done above
            float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
            for (int q = 0; q < world; q++)
                add8(acc, src[t][rank][i]);
            uint4 o;
            __nv_bfloat162 *h = reinterpret_cast<__nv_bfloat162 *>(&o);
#pragma unroll
            for (int j = 0; j < 4; j++)
                h[j] = __floats2bfloat162_rn(acc[2 * j], acc[2 * j + 1]);
            dst[t][rank][i] = o;
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
