// pkb/62_torchharmonics_spherical_convolution (ParallelKernelBench problem 62): torch-harmonics'
// distributed DISCO convolution on the sphere. The W ranks form a grid of P = W / 2 polar by
// 2 azimuth ranks, rank = p * 2 + a. Rank (p, a) holds the input field's latitudes
// [p Hp, (p+1) Hp) (Hp = H / P) and longitudes [a Ll, (a+1) Ll) (Ll = L / 2) of all B x C
// channels, x: B x C x Hp x Ll, and its own sparse filter psi (K x H rows over its Hp x L local
// grid points, E entries a row: psi_col = local_lat * L + lon, psi_val). PKB's steps, which the
// baseline follows:
//   1. azimuth transpose: split the channels over the two azimuth ranks, gather the longitudes:
//      xg[b][cl][lat][lon] = x_(p, lon / Ll)[b][a Cl + cl][lat][lon % Ll]      (Cl = C / 2)
//   2. contraction (psi is periodic in longitude: pscale = 1, output longitude = shift):
//      y[b][cl][k][h][j] = sum_e psi_val[k][h][e] xg[b][cl][lat_e][(lon_e + j) % L]
//   3. all-reduce of y over the polar ranks (same a), then keep latitudes [p Hl, (p+1) Hl)
//      (Hl = H / P): here one reduce-scatter, which is what the all-reduce and slice amount to;
//   4. azimuth transpose back: split the longitudes, gather the channels:
//      X[b][c][k][hl][ll] = y_(p, c / Cl)[b][c % Cl][k][p Hl + hl][a Ll + ll]
//   5. out[b][o][hl][ll] = bias[o] + sum_{c in o's group, k} weight[o][c - g Cg][k]
//   X[b][c][k][hl][ll]
//      (a grouped GEMM, fp32: cuBLAS SGEMM).
// out is B x O x Hl x Ll on every rank. weight and bias differ per rank (PKB seeds each rank).
#include "pk_problem_module.h"
#include "pk_splitmix.h"

#include <cublas_v2.h>

typedef int (*entry_fn)(const pk_ctx *, const float *, const int *, const float *, const float *,
                        const float *, float *, size_t, size_t, size_t, size_t, size_t, size_t,
                        size_t, size_t);

#define THREADS 256

// The runner's call keys (problems/runner/pk_runner.h): trials count from 0, timed calls start
// at KEY_TIMED_BASE.
#define KEY_TIMED_BASE (1 << 21)

static int cuda_code(cudaError_t e) {
    return e == cudaSuccess ? 0 : 2000 + (int)e;
}
static int blas_code(cublasStatus_t s) {
    return s == CUBLAS_STATUS_SUCCESS ? 0 : 3000 + (int)s;
}
static int nccl_code(ncclResult_t r) {
    return r == ncclSuccess ? 0 : 1000 + (int)r;
}

static unsigned grid_for(long long n) {
    const long long b = (n + THREADS - 1) / THREADS;
    return (unsigned)(b < 4 * 132 * 8 ? b : 4 * 132 * 8);
}

// This rank's cuBLAS handle and workspace and the polar communicator (ranks with the same a),
// made once by init() outside timing.
#define BLAS_WS_BYTES ((size_t)32 << 20)
static cublasHandle_t g_blas;
static void *g_blas_ws;
static cudaStream_t g_blas_stream;
static ncclComm_t g_polar;

static int blas_on(cudaStream_t stream) {
    if (g_blas_stream == stream)
        return 0;
    int rc = blas_code(cublasSetStream(g_blas, stream));
    if (!rc)
        rc = blas_code(cublasSetWorkspace(g_blas, g_blas_ws, BLAS_WS_BYTES));
    g_blas_stream = rc ? NULL : stream;
    return rc;
}

static int init(const pk_ctx *ctx) {
    int rc = 0;
    if (!g_blas) {
        rc = blas_code(cublasCreate(&g_blas));
        if (!rc)
            rc = cuda_code(cudaMalloc(&g_blas_ws, BLAS_WS_BYTES));
    }
    if (!rc && ctx->world_size > 2 && !g_polar)
        rc = nccl_code(ncclCommSplit(ctx->comm, ctx->rank % 2, ctx->rank / 2, &g_polar, NULL));
    return rc ? rc : blas_on(ctx->stream);
}

// The reference's buffers, one ncclMemAlloc'ed region registered as an NCCL window (NCCL 2.28
// can hang between registered and plain memory: docs/problems.md, known issues), made in the
// first reference call (a correctness trial, which every rank makes) and remade when it grows:
//   xs [j][b][cl][lat][ll]   the channels packed for azimuth rank j      B C Hp Ll
//   xr [i][b][cl][lat][ll]   azimuth rank i's longitudes of our channels B C Hp Ll
//   y  [q][j][b][cl][k][hl][ll]  the partial contraction, by polar block q and azimuth rank j
//   yr [j][b][cl][k][hl][ll]     our polar block, summed over the polar ranks
//   zr [i][b][cl][k][hl][ll]     azimuth rank i's channels of our longitudes
static struct {
    float *base;
    size_t bytes;
    ncclWindow_t win;
} g_ref;

static void fini(const pk_ctx *ctx) {
    if (g_ref.base) {
        ncclCommWindowDeregister(ctx->comm, g_ref.win);
        ncclMemFree(g_ref.base);
    }
    g_ref = {};
    if (g_polar)
        ncclCommDestroy(g_polar);
    g_polar = NULL;
    if (g_blas)
        cublasDestroy(g_blas);
    cudaFree(g_blas_ws);
    g_blas = NULL;
    g_blas_ws = NULL;
    g_blas_stream = NULL;
}

static int ref_buffers(const pk_ctx *ctx, size_t bytes) {
    if (g_ref.bytes >= bytes)
        return 0;
    int rc = cuda_code(cudaStreamSynchronize(ctx->stream));
    if (rc)
        return rc;
    if (g_ref.base) {
        ncclCommWindowDeregister(ctx->comm, g_ref.win);
        ncclMemFree(g_ref.base);
        g_ref = {};
    }
    rc = nccl_code(ncclMemAlloc((void **)&g_ref.base, bytes));
    if (!rc)
        rc = nccl_code(ncclCommWindowRegister(ctx->comm, g_ref.base, bytes, &g_ref.win,
                                              NCCL_WIN_COLL_SYMMETRIC));
    if (!rc)
        g_ref.bytes = bytes;
    return rc;
}

// xs[j][b][cl][lat][ll] = x[b][j Cl + cl][lat][ll] (PKB's split along the channels and
// .contiguous()).
__global__ void pack_channels(const float *x, float *xs, long long B, long long C, long long n2d) {
    const long long Cl = C / 2, n = B * C * n2d;
    for (long long i = (long long)blockIdx.x * THREADS + threadIdx.x; i < n;
         i += (long long)gridDim.x * THREADS) {
        const long long s = i % n2d, c = i / n2d % C, b = i / (n2d * C);
        xs[((c / Cl * B + b) * Cl + c % Cl) * n2d + s] = x[i];
    }
}

// The contraction, one output element a thread, written in the layout of the exchanges that
// follow: y[q][j][b][cl][k][hl][ll] for latitude h = q Hl + hl and output longitude
// jo = j Ll + ll. xr is read in place of the concatenation along the longitudes.
__global__ void contract(const float *xr, const int *psi_col, const float *psi_val, float *y,
                         long long B, long long Cl, long long K, long long H, long long L,
                         long long E, long long Hp, long long P) {
    const long long Hl = H / P, Ll = L / 2, n = B * Cl * K * H * L;
    for (long long i = (long long)blockIdx.x * THREADS + threadIdx.x; i < n;
         i += (long long)gridDim.x * THREADS) {
        long long t = i;
        const long long ll = t % Ll;
        t /= Ll;
        const long long hl = t % Hl;
        t /= Hl;
        const long long k = t % K;
        t /= K;
        const long long cl = t % Cl;
        t /= Cl;
        const long long b = t % B;
        t /= B;
        const long long j = t % 2, q = t / 2;
        const long long h = q * Hl + hl, jo = j * Ll + ll;
        const long long row = (k * H + h) * E;
        float acc = 0.f;
        for (long long e = 0; e < E; e++) {
            const long long col = psi_col[row + e], lat = col / L, lon = (col % L + jo) % L;
            acc += psi_val[row + e] *
                   xr[(((lon / Ll) * B + b) * Cl + cl) * Hp * Ll + lat * Ll + lon % Ll];
        }
        y[i] = acc;
    }
}

// out[b][o][s] = bias[o]; the GEMMs accumulate onto it.
__global__ void fill_bias(float *out, const float *bias, long long B, long long O, long long N) {
    for (long long i = (long long)blockIdx.x * THREADS + threadIdx.x; i < B * O * N;
         i += (long long)gridDim.x * THREADS)
        out[i] = bias[i / N % O];
}

// Baseline, PKB's steps one after another (host-driven NCCL, no overlap): the channel pack and
// the azimuth all-to-all (ncclSend / ncclRecv over the world communicator, to the two ranks of
// this polar row); the contraction, one pass, into the exchange layout; the polar all-reduce and
// slice as one ncclReduceScatter over the polar communicator (none at W = 2); the azimuth
// all-to-all back; the bias, then per group and per azimuth block of channels one cuBLAS
// strided-batched SGEMM (fp32, over the batch) accumulating onto it.
static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const long long B = call->dims[0], C = call->dims[1], O = call->dims[2], K = call->dims[3],
                    G = call->dims[4], H = call->dims[5], L = call->dims[6], E = call->dims[7];
    const int W = ctx->world_size, rank = ctx->rank;
    const long long P = W / 2, p = rank / 2, Hp = H / P, Hl = H / P, Ll = L / 2, Cl = C / 2;
    const long long Cg = C / G, Og = O / G, N = Hl * Ll;
    const float *x = static_cast<const float *>(call->args[0]);
    const int *psi_col = static_cast<const int *>(call->args[1]);
    const float *psi_val = static_cast<const float *>(call->args[2]);
    const float *weight = static_cast<const float *>(call->args[3]);
    const float *bias = static_cast<const float *>(call->args[4]);
    float *out = static_cast<float *>(call->args[5]);
    cudaStream_t s = ctx->stream;

    const long long nx = B * C * Hp * Ll, ny = B * Cl * K * H * L, nyr = ny / P;
    int rc = ref_buffers(ctx, (size_t)(2 * nx + ny + 2 * nyr) * sizeof(float));
    if (!rc)
        rc = blas_on(s);
    if (rc)
        return rc;
    float *xs = g_ref.base, *xr = xs + nx, *y = xr + nx, *yr = y + ny, *zr = yr + nyr;
    if (P == 1)
        yr = y; // no polar reduction: the contraction is the send buffer

    pack_channels<<<grid_for(nx), THREADS, 0, s>>>(x, xs, B, C, Hp * Ll);
    rc = cuda_code(cudaGetLastError());
    if (!rc)
        rc = nccl_code(ncclGroupStart());
    for (int j = 0; j < 2 && !rc; j++) {
        const int peer = (int)(p * 2 + j);
        rc =
            nccl_code(ncclSend(xs + j * (nx / 2), (size_t)(nx / 2), ncclFloat, peer, ctx->comm, s));
        if (!rc)
            rc = nccl_code(
                ncclRecv(xr + j * (nx / 2), (size_t)(nx / 2), ncclFloat, peer, ctx->comm, s));
    }
    int end = nccl_code(ncclGroupEnd());
    if (rc || end)
        return rc ? rc : end;

    contract<<<grid_for(ny), THREADS, 0, s>>>(xr, psi_col, psi_val, y, B, Cl, K, H, L, E, Hp, P);
    rc = cuda_code(cudaGetLastError());
    if (!rc && P > 1)
        rc = nccl_code(ncclReduceScatter(y, yr, (size_t)nyr, ncclFloat, ncclSum, g_polar, s));
    if (!rc)
        rc = nccl_code(ncclGroupStart());
    for (int j = 0; j < 2 && !rc; j++) {
        const int peer = (int)(p * 2 + j);
        rc = nccl_code(
            ncclSend(yr + j * (nyr / 2), (size_t)(nyr / 2), ncclFloat, peer, ctx->comm, s));
        if (!rc)
            rc = nccl_code(
                ncclRecv(zr + j * (nyr / 2), (size_t)(nyr / 2), ncclFloat, peer, ctx->comm, s));
    }
    end = nccl_code(ncclGroupEnd());
    if (rc || end)
        return rc ? rc : end;

    fill_bias<<<grid_for(B * O * N), THREADS, 0, s>>>(out, bias, B, O, N);
    rc = cuda_code(cudaGetLastError());
    // Row-major out_b (Og x N) += w_g (Og x kk) zr_b (kk x N), as column-major
    // out_b^T = zr_b^T w_g^T; zr's rows for batch b and azimuth block i are (cl, k).
    const float one = 1.f;
    for (long long g = 0; g < G && !rc; g++)
        for (long long i = 0; i < 2 && !rc; i++) {
            const long long c0 = g * Cg > i * Cl ? g * Cg : i * Cl,
                            c1 = (g + 1) * Cg < (i + 1) * Cl ? (g + 1) * Cg : (i + 1) * Cl;
            if (c0 >= c1)
                continue;
            const float *A = weight + g * Og * Cg * K + (c0 - g * Cg) * K;
            const float *Bm = zr + ((i * B) * Cl + (c0 - i * Cl)) * K * N;
            rc = blas_code(cublasSgemmStridedBatched(g_blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)N,
                                                     (int)Og, (int)((c1 - c0) * K), &one, Bm,
                                                     (int)N, Cl * K * N, A, (int)(Cg * K), 0, &one,
                                                     out + g * Og * N, (int)N, O * N, (int)B));
        }
    return rc;
}

// generate(): psi's columns (local_lat * L + lon), the same function of (seed, key) on every
// rank but each rank's own (PKB's psi depends on the polar rank). Trials (key % 3): 0 and every
// timed call PKB's pattern, local_lat = (h - p Hp) mod Hp and lon = (h + e (k + 1)) mod L;
// 1 columns drawn anywhere in the rank's Hp x L block; 2 columns drawn on the shard edges
// (latitudes 0 and Hp - 1, longitudes 0, Ll - 1, Ll and L - 1, repeats included).
__global__ void psi_columns(int *col, long long K, long long H, long long L, long long E,
                            long long Hp, long long p, int cls, uint64_t key) {
    const long long n = K * H * E;
    for (long long i = (long long)blockIdx.x * THREADS + threadIdx.x; i < n;
         i += (long long)gridDim.x * THREADS) {
        const long long e = i % E, h = i / E % H, k = i / (E * H);
        long long lat, lon;
        if (cls == 0) {
            lat = ((h - p * Hp) % Hp + Hp) % Hp;
            lon = (h + e * (k + 1)) % L;
        } else {
            const uint64_t r = pk_splitmix64(key + (uint64_t)i);
            if (cls == 1) {
                lat = (long long)(r % (uint64_t)Hp);
                lon = (long long)((r >> 32) % (uint64_t)L);
            } else {
                lat = (r & 1) ? Hp - 1 : 0;
                const long long edges[4] = {0, L / 2 - 1, L / 2, L - 1};
                lon = edges[(r >> 8) & 3];
            }
        }
        col[i] = (int)(lat * L + lon);
    }
}

static int generate(const pk_problem_call *call, uint64_t seed, int key) {
    const pk_ctx *ctx = call->ctx;
    const long long K = call->dims[3], H = call->dims[5], L = call->dims[6], E = call->dims[7];
    const long long P = ctx->world_size / 2, p = ctx->rank / 2;
    const int cls = key >= KEY_TIMED_BASE ? 0 : key % 3;
    const uint64_t k =
        pk_splitmix64(seed ^ pk_splitmix64((0x62ull << 40) ^
                                           ((uint64_t)(unsigned)key * 64 + (uint64_t)ctx->rank)));
    psi_columns<<<grid_for(K * H * E), THREADS, 0, ctx->stream>>>(static_cast<int *>(call->args[1]),
                                                                  K, H, L, E, H / P, p, cls, k);
    return cuda_code(cudaGetLastError());
}

static int invoke(void *fn, const pk_problem_call *c) {
    if (!fn || c->n_args != 6 || c->n_dims < 8)
        return -1;
    return reinterpret_cast<entry_fn>(fn)(
        c->ctx, static_cast<const float *>(c->args[0]), static_cast<const int *>(c->args[1]),
        static_cast<const float *>(c->args[2]), static_cast<const float *>(c->args[3]),
        static_cast<const float *>(c->args[4]), static_cast<float *>(c->args[5]),
        (size_t)c->dims[0], (size_t)c->dims[1], (size_t)c->dims[2], (size_t)c->dims[3],
        (size_t)c->dims[4], (size_t)c->dims[5], (size_t)c->dims[6], (size_t)c->dims[7]);
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, invoke, generate, init, fini, NULL};
    return &module;
}
