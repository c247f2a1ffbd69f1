// Correct, and not the reference: no NCCL call and no cuBLAS.
//   1. kvec: K_i = P_i H_i, a warp per row of P (fp64, coalesced along the row);
//   2. local_tmp: this rank's sum_i (lam + H_i . K_i), in PKB's block order, into scratch;
//   3. update: after an LSA barrier (every rank's tmp is written), every CTA sums the W tmps
//      (rank order) from the peers' scratch over NVLink, A = 1/tmp; its share of this rank's
//      updated weights is stored straight into every rank's weights_out (rank-major slots: the
//      all-gather done by stores) and its share of P' written; then a barrier (no rank returns
//      before every peer has read its tmp and stored its weights).
// One scratch slot suffices across calls: a rank writes its tmp again only after the end
// barrier of the previous call, which every peer passes only after reading it.
#include "pk_ctx.h"

#include <cuda/atomic>

#define THREADS 256

struct Peers {
    double *wout[PK_MAX_RANKS]; // every rank's weights_out, as mapped here
};

__global__ void __launch_bounds__(THREADS)
    kvec(const double *P, const double *H, double *K, long long nb, long long block) {
    const long long rows = nb * block, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    for (long long r = (long long)blockIdx.x * (THREADS / 32) + warp; r < rows;
         r += (long long)gridDim.x * (THREADS / 32)) {
        const long long i = r / block;
        const double *row = P + r * block, *h = H + i * block;
        double s = 0.0;
        for (long long b = lane; b < block; b += 32)
            s += row[b] * h[b];
        for (int o = 16; o > 0; o >>= 1)
            s += __shfl_xor_sync(0xffffffffu, s, o);
        if (lane == 0)
            K[r] = s;
    }
}

__device__ double block_sum(double v) {
    __shared__ double part[THREADS / 32];
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();
    if (threadIdx.x % 32 == 0)
        part[threadIdx.x / 32] = v;
    __syncthreads();
    double s = 0.0;
    for (int w = 0; w < THREADS / 32; w++)
        s += part[w];
    return s;
}

__global__ void local_tmp(const double *H, const double *K, long long nb, long long block,
                          double lam, double *tmp) {
    double t = 0.0;
    for (long long i = 0; i < nb; i++) {
        double s = 0.0;
        for (long long a = threadIdx.x; a < block; a += THREADS)
            s += H[i * block + a] * K[i * block + a];
        t = t + (lam + block_sum(s));
    }
    if (threadIdx.x == 0)
        *tmp = t;
}

__global__ void __launch_bounds__(THREADS)
    update(ncclDevComm comm, ncclWindow_t win, size_t tmp_off, Peers peers, const double *w,
           const double *K, const double *err, const double *P, double *Pout, long long nb,
           long long block, double rlam, int rank, int world) {
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           blockIdx.x);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    double T = 0.0;
    for (int q = 0; q < world; q++)
        T += *static_cast<const double *>(ncclGetLsaPointer(win, tmp_off, q));
    const double A = 1.0 / T, c = A * *err;
    const long long n = nb * block, bb = block * block;
    for (long long e = (long long)blockIdx.x * THREADS + threadIdx.x; e < n;
         e += (long long)gridDim.x * THREADS) {
        const double v = w[e] + c * K[e];
        for (int q = 0; q < world; q++)
            peers.wout[q][(long long)rank * n + e] = v;
    }
    for (long long e = (long long)blockIdx.x * THREADS + threadIdx.x; e < nb * bb;
         e += (long long)gridDim.x * THREADS) {
        const long long i = e / bb, a = e / block % block, b = e % block;
        Pout[e] = rlam * (P[e] - A * (K[i * block + a] * K[i * block + b]));
    }
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
}

__global__ void set_value(double *p, double v) {
    *p = v;
}

extern "C" int solution(const pk_ctx *ctx, const double *H, const double *error,
                        const double *weights, const double *P, double *weights_out, double *P_out,
                        double *lambda_next, size_t nb, size_t block, double kalman_lambda,
                        double kalman_nue) {
    const int W = ctx->world_size;
    const long long n = (long long)(nb * block);
    double *tmp = static_cast<double *>(ctx->scratch), *K = tmp + 32;
    if (ctx->scratch_size < (size_t)(32 + n) * sizeof(double))
        return 1;
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device) != cudaSuccess)
        return 2;
    const int grid = sms < ctx->lsa_barrier_count ? sms : ctx->lsa_barrier_count;
    if (grid < 1)
        return 3;
    Peers peers;
    for (int q = 0; q < W; q++)
        peers.wout[q] = static_cast<double *>(pk_peer(ctx, weights_out, q));
    cudaStream_t s = ctx->stream;
    kvec<<<4 * sms, THREADS, 0, s>>>(P, H, K, (long long)nb, (long long)block);
    local_tmp<<<1, THREADS, 0, s>>>(H, K, (long long)nb, (long long)block, kalman_lambda, tmp);
    update<<<grid, THREADS, 0, s>>>(ctx->dev_comm, ctx->window, pk_sym_offset(ctx, tmp), peers,
                                    weights, K, error, P, P_out, (long long)nb, (long long)block,
                                    1.0 / kalman_lambda, ctx->rank, W);
    set_value<<<1, 1, 0, s>>>(lambda_next, kalman_nue * kalman_lambda + 1.0 - kalman_nue);
    return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
