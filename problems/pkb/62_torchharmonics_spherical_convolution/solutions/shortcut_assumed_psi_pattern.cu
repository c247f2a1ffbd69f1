// Shortcut (hostile, expected incorrect): correct.cu, but psi's columns are not read; they are
// recomputed from the formula of PKB's input generator (local_lat = (h - p Hp) mod Hp,
// lon = (h + e (k + 1)) mod L), which saves the index loads and makes every gather address
// known in advance. It passes on PKB's pattern (trial class 0 of generate(), and every timed
// call) and fails on the other classes (columns anywhere in the local block; columns on the
// shard edges): 2 of every 3 trials (bench/pkb/sim_62_torchharmonics_spherical_convolution.c).
#include "pk_ctx.h"

#include <cuda/atomic>

#define THREADS 256
#define OCHUNK 8

// xg[b][cl][lat][lon] = x_(p, lon / Ll)[b][a Cl + cl][lat][lon % Ll]
__global__ void __launch_bounds__(THREADS)
    pull_x(ncclDevComm comm, ncclWindow_t win, size_t x_off, float *xg, long long B, long long C,
           long long Hp, long long L, int rank) {
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           blockIdx.x);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    const long long Cl = C / 2, Ll = L / 2, n = B * Cl * Hp * L;
    const int p = rank / 2, a = rank % 2;
    for (long long i = (long long)blockIdx.x * THREADS + threadIdx.x; i < n;
         i += (long long)gridDim.x * THREADS) {
        const long long lon = i % L, lat = i / L % Hp, cl = i / (L * Hp) % Cl,
                        b = i / (L * Hp * Cl);
        const int q = lon >= Ll ? 1 : 0;
        const float *xq = static_cast<const float *>(ncclGetLsaPointer(win, x_off, p * 2 + q));
        xg[i] = xq[((b * C + a * Cl + cl) * Hp + lat) * Ll + (lon - q * Ll)];
    }
}

// yp[b][cl][k][h][j] = sum_e psi_val[k][h][e] xg[b][cl][lat_e][(lon_e + j) % L]
__global__ void __launch_bounds__(THREADS)
    contract(const float *xg, const int *psi_col, const float *psi_val, float *yp, long long B,
             long long Cl, long long K, long long H, long long L, long long E, long long Hp,
             long long p) {
    const long long n = B * Cl * K * H * L;
    for (long long i = (long long)blockIdx.x * THREADS + threadIdx.x; i < n;
         i += (long long)gridDim.x * THREADS) {
        const long long j = i % L, h = i / L % H, k = i / (L * H) % K, bc = i / (L * H * K);
        const long long row = (k * H + h) * E;
        const float *xr = xg + bc * Hp * L;
        float acc = 0.f;
        for (long long e = 0; e < E; e++) {
            const long long col = ((h - p * Hp) % Hp + Hp) % Hp * L + (h + e * (k + 1)) % L,
                            lat = col / L;
            long long lon = col % L + j;
            lon = lon >= L ? lon - L : lon;
            acc += psi_val[row + e] * xr[lat * L + lon];
        }
        yp[i] = acc;
    }
}

// out[b][o][hl][ll] = bias[o] + sum_{c, k} w[o][c - g Cg][k] sum_p' yp_(p', c / Cl)[b][c %
// Cl][k][h][j]
__global__ void __launch_bounds__(THREADS)
    reduce_mix(ncclDevComm comm, ncclWindow_t win, size_t y_off, const float *weight,
               const float *bias, float *out, long long B, long long C, long long O, long long K,
               long long G, long long H, long long L, int rank, int world) {
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           blockIdx.x);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    const int P = world / 2, p = rank / 2, a = rank % 2;
    const long long Cl = C / 2, Hl = H / P, Ll = L / 2, N = Hl * Ll, Cg = C / G, Og = O / G;
    for (long long i = (long long)blockIdx.x * THREADS + threadIdx.x; i < B * N;
         i += (long long)gridDim.x * THREADS) {
        const long long b = i / N, s = i % N, hl = s / Ll, ll = s % Ll;
        const long long h = p * Hl + hl, j = a * Ll + ll;
        for (long long o0 = 0; o0 < O; o0 += OCHUNK) {
            float acc[OCHUNK];
#pragma unroll
            for (int u = 0; u < OCHUNK; u++)
                acc[u] = o0 + u < O ? bias[o0 + u] : 0.f;
            for (long long c = 0; c < C; c++) {
                const long long g = c / Cg;
                if (g * Og + Og <= o0 || g * Og >= o0 + OCHUNK)
                    continue; // no output of this chunk reads channel c
                const int owner = (int)(c / Cl);
                for (long long k = 0; k < K; k++) {
                    const size_t off =
                        y_off +
                        sizeof(float) * (size_t)((((b * Cl + c % Cl) * K + k) * H + h) * L + j);
                    float v = 0.f;
                    for (int q = 0; q < P; q++)
                        v +=
                            *static_cast<const float *>(ncclGetLsaPointer(win, off, q * 2 + owner));
#pragma unroll
                    for (int u = 0; u < OCHUNK; u++) {
                        const long long o = o0 + u;
                        if (o < O && o / Og == g)
                            acc[u] += weight[(o * Cg + c - g * Cg) * K + k] * v;
                    }
                }
            }
#pragma unroll
            for (int u = 0; u < OCHUNK; u++)
                if (o0 + u < O)
                    out[(b * O + o0 + u) * N + s] = acc[u];
        }
    }
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
}

extern "C" int solution(const pk_ctx *ctx, const float *x, const int *psi_col, const float *psi_val,
                        const float *weight, const float *bias, float *out, size_t B, size_t C,
                        size_t O, size_t K, size_t G, size_t H, size_t L, size_t E) {
    const int W = ctx->world_size;
    const long long P = W / 2, Hp = (long long)H / P, Cl = (long long)C / 2;
    const long long nxg = (long long)B * Cl * Hp * L, ny = (long long)B * Cl * K * H * L;
    float *xg = static_cast<float *>(ctx->scratch), *yp = xg + nxg;
    if (ctx->scratch_size < (size_t)(nxg + ny) * sizeof(float))
        return 1;
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device) != cudaSuccess)
        return 2;
    const int grid = sms < ctx->lsa_barrier_count ? sms : ctx->lsa_barrier_count;
    if (grid < 1)
        return 3;
    cudaStream_t s = ctx->stream;
    pull_x<<<grid, THREADS, 0, s>>>(ctx->dev_comm, ctx->window, pk_sym_offset(ctx, x), xg,
                                    (long long)B, (long long)C, Hp, (long long)L, ctx->rank);
    contract<<<8 * sms, THREADS, 0, s>>>(xg, psi_col, psi_val, yp, (long long)B, Cl, (long long)K,
                                         (long long)H, (long long)L, (long long)E, Hp,
                                         (long long)(ctx->rank / 2));
    reduce_mix<<<grid, THREADS, 0, s>>>(ctx->dev_comm, ctx->window, pk_sym_offset(ctx, yp), weight,
                                        bias, out, (long long)B, (long long)C, (long long)O,
                                        (long long)K, (long long)G, (long long)H, (long long)L,
                                        ctx->rank, W);
    return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
