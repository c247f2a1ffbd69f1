// Correct, and not the reference: no NCCL call, no total mass and no total_batch (both cancel:
// every iteration's per-prototype division removes any common factor, and the final
// multiplication undoes the division by total_batch), and the per-prototype division fused into
// the per-sample normalisation. q lives in the output:
//   q = exp(t / temp);
//   per iteration: this rank's per-prototype partial sums into ctx->scratch (a slot that
//   alternates from iteration to iteration, across calls too); an LSA barrier (every rank's
//   partials are written); every rank sums the W partials in rank order, read from the peers'
//   scratch over NVLink (ncclGetLsaPointer on the arena's window), times K; then one block per
//   sample divides its row by them, sums it and divides it by the sum.
// Why two slots suffice: a rank writes a slot again two iterations later, after the barrier of
// the iteration in between, which every peer reaches only after it has finished reading the
// slot.
#include "pk_ctx.h"

#include <cuda/atomic>

#define THREADS 256
#define SPLIT 16 // the samples' split of the per-prototype partial sums

static unsigned long long g_round; // iterations run so far, the same on every rank

__global__ void exp_q(const float *t, float *q, long long n, float temp) {
    for (long long i = (long long)blockIdx.x * THREADS + threadIdx.x; i < n;
         i += (long long)gridDim.x * THREADS)
        q[i] = expf(t[i] / temp);
}

// part[k] += sum of q[b][k] over this block's share of the samples (part zeroed before).
__global__ void proto_partial(const float *q, long long B, long long K, float *part) {
    const long long k = (long long)blockIdx.x * THREADS + threadIdx.x;
    if (k >= K)
        return;
    const long long b0 = B * blockIdx.y / SPLIT, b1 = B * (blockIdx.y + 1) / SPLIT;
    float acc = 0.f;
    for (long long b = b0; b < b1; b++)
        acc += q[b * K + k];
    atomicAdd(part + k, acc);
}

// sums[k] = K * (part_0[k] + ... + part_{W-1}[k]), the same on every rank.
__global__ void __launch_bounds__(THREADS)
    combine(ncclDevComm comm, ncclWindow_t win, size_t part_off, float *sums, int world,
            long long K) {
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           blockIdx.x);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    for (long long k = (long long)blockIdx.x * THREADS + threadIdx.x; k < K;
         k += (long long)gridDim.x * THREADS) {
        float s = 0.f;
        for (int p = 0; p < world; p++)
            s += static_cast<const float *>(ncclGetLsaPointer(win, part_off, p))[k];
        sums[k] = s * (float)K;
    }
}

__device__ float block_sum(float v) {
    __shared__ float part[THREADS / 32];
    for (int o = 16; o > 0; o /= 2)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();
    if (threadIdx.x % 32 == 0)
        part[threadIdx.x / 32] = v;
    __syncthreads();
    float s = 0.f;
    for (int w = 0; w < THREADS / 32; w++)
        s += part[w];
    return s;
}

// Row b: q /= sums (per prototype), then q /= its sum.
__global__ void __launch_bounds__(THREADS)
    normalise_rows(float *q, long long K, const float *sums) {
    float *row = q + (long long)blockIdx.x * K;
    float acc = 0.f;
    for (long long k = threadIdx.x; k < K; k += THREADS) {
        const float v = row[k] / sums[k];
        row[k] = v;
        acc += v;
    }
    const float c = block_sum(acc);
    for (long long k = threadIdx.x; k < K; k += THREADS)
        row[k] /= c;
}

extern "C" int solution(const pk_ctx *ctx, const float *teacher_output, const int64_t *n_masked,
                        float *q, size_t B, size_t K, size_t n_iter, float teacher_temp) {
    (void)n_masked; // total_batch cancels
    if (ctx->scratch_size < 3 * K * sizeof(float))
        return 1;
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device) != cudaSuccess)
        return 2;
    // Every CTA of combine waits for its twin on each peer: all must be resident.
    const int grid = sms < ctx->lsa_barrier_count ? sms : ctx->lsa_barrier_count;
    if (grid < 1)
        return 3;
    cudaStream_t s = ctx->stream;
    const long long b = (long long)B, k = (long long)K, n = b * k;
    float *slots = static_cast<float *>(ctx->scratch), *sums = slots + 2 * K;
    exp_q<<<4 * sms, THREADS, 0, s>>>(teacher_output, q, n, teacher_temp);
    for (size_t it = 0; it < n_iter; it++, g_round++) {
        float *part = slots + (g_round % 2) * K;
        if (cudaMemsetAsync(part, 0, K * sizeof(float), s) != cudaSuccess)
            return 4;
        proto_partial<<<dim3((unsigned)((k + THREADS - 1) / THREADS), SPLIT), THREADS, 0, s>>>(
            q, b, k, part);
        combine<<<grid, THREADS, 0, s>>>(ctx->dev_comm, ctx->window, pk_sym_offset(ctx, part), sums,
                                         ctx->world_size, k);
        normalise_rows<<<(unsigned)B, THREADS, 0, s>>>(q, k, sums);
    }
    return cudaGetLastError() == cudaSuccess ? 0 : 5;
}
