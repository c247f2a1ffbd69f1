// pkb/71_hyena_conv1d_boundary_exchange (ParallelKernelBench problem 71): Hyena's short causal
// depthwise convolution (kernel K, no bias) of a sequence split across the ranks in the zigzag
// order of context parallelism. The sequence is 2W chunks; rank r holds chunk r ("a") and chunk
// 2W-1-r ("b"). Rank r holds len = l_r (its chunks' length, K-1 <= l_r <= L, ragged across
// ranks: both of a rank's chunks have it), x (B x C x 2L capacity, bf16: chunk a at columns
// [0, l_r) of each (b, c) row, chunk b at [L, L + l_r)) and its own weight (C x K). With the
// halos (the K-1 elements before each chunk in the global sequence)
//   halo_a = rank r-1's chunk a, elements [l_{r-1} - (K-1), l_{r-1})   (zeros on rank 0),
//   halo_b = rank r+1's chunk b, elements [l_{r+1} - (K-1), l_{r+1})   (rank W-1: its own chunk
//            a's last K-1 elements, since chunk W-1 precedes chunk W),
// it must produce y (B x C x 2L capacity): for each chunk, over xp = [halo; chunk],
//   y[b][c][t] = bf16(sum_k w[c][k] * xp[t + k])   for t < l_r, zero for l_r <= t < L.
// PKB: batch_isend_irecv of the chunks' tails with the neighbours, torch.cat, F.conv1d(groups=C).
#include "pk_problem_module.h"
#include "pk_splitmix.h"

#include <cuda_bf16.h>

typedef __nv_bfloat16 bf16;

typedef int (*entry_fn)(const pk_ctx *, const bf16 *, const int64_t *, const bf16 *, bf16 *, size_t,
                        size_t, size_t, size_t);

// The runner's call keys (problems/runner/pk_runner.h): trials count from 0, the call checked
// after timing is KEY_POST_TIMING, timed calls start at KEY_TIMED_BASE.
#define KEY_POST_TIMING (1 << 20)
#define KEY_TIMED_BASE (1 << 21)

#define THREADS 256
#define TILE 1024 // outputs per CTA and tile: 4 per thread
#define KMAX 64   // meta.json's constraint K <= 64

static int cuda_code(cudaError_t e) {
    return e == cudaSuccess ? 0 : 2000 + (int)e;
}

static int nccl_code(ncclResult_t r) {
    return r == ncclSuccess ? 0 : 1000 + (int)r;
}

// The reference's halo buffers (ncclMemAlloc'ed and registered as an NCCL window: NCCL 2.28 can
// hang between registered and plain memory, docs/problems.md, known issues): [0] our chunk a's
// tail, [1] our chunk b's tail, [2] the received halo_a, [3] the received halo_b, each B C (K-1).
// Made in the first reference call (init() does not know the dims), a correctness trial, never
// a timed call; every rank makes it in the same call, since the registration is collective.
static struct {
    bf16 *halo;
    size_t bytes;
    ncclWindow_t win;
} g_ref;

static int ref_buffers(const pk_ctx *ctx, size_t bytes) {
    if (g_ref.bytes >= bytes)
        return 0;
    if (g_ref.halo) {
        ncclCommWindowDeregister(ctx->comm, g_ref.win);
        ncclMemFree(g_ref.halo);
        g_ref.halo = NULL;
        g_ref.bytes = 0;
    }
    int rc = nccl_code(ncclMemAlloc((void **)&g_ref.halo, bytes));
    if (!rc)
        rc = nccl_code(ncclCommWindowRegister(ctx->comm, g_ref.halo, bytes, &g_ref.win,
                                              NCCL_WIN_COLL_SYMMETRIC));
    if (!rc)
        g_ref.bytes = bytes;
    return rc;
}

static void fini(const pk_ctx *ctx) {
    if (g_ref.halo) {
        ncclCommWindowDeregister(ctx->comm, g_ref.win);
        ncclMemFree(g_ref.halo);
    }
    g_ref = {};
}

// The chunks' length, as generate() wrote it (clamped: the generator only writes K-1..L).
__device__ __forceinline__ long long chunk_len(const int64_t *len, long long L, long long K) {
    const long long l = *len;
    return l < K - 1 ? K - 1 : l > L ? L : l;
}

// tails[e][b c][k] = x[b][c][e L + l - (K-1) + k]: the last K-1 elements of chunk e (a, b).
__global__ void pack_tails(const bf16 *x, const int64_t *len, bf16 *tails, long long rows,
                           long long L, long long K) {
    const long long l = chunk_len(len, L, K), h = K - 1, n = rows * h;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < 2 * n;
         i += (long long)gridDim.x * blockDim.x) {
        const long long e = i / n, row = i % n / h, k = i % h;
        tails[i] = x[row * 2 * L + e * L + l - h + k];
    }
}

// One CTA per (row, chunk, tile of TILE outputs): the tile's TILE + K - 1 inputs [halo; chunk]
// in shared memory, then each thread sums K products in fp32 for 4 outputs and rounds once.
// halo_a, halo_b: this rank's received halos (B C x (K-1)); NULL halo_a means zeros (rank 0),
// NULL halo_b means the own chunk a's tail (the last rank). Outputs beyond l are zero.
__global__ void __launch_bounds__(THREADS)
    conv_chunks(const bf16 *x, const int64_t *len, const bf16 *w, const bf16 *halo_a,
                const bf16 *halo_b, bf16 *y, long long C, long long L, long long K) {
    __shared__ float s[TILE + KMAX - 1];
    __shared__ float ws[KMAX];
    const long long l = chunk_len(len, L, K), h = K - 1, tiles = (L + TILE - 1) / TILE;
    const long long tile = blockIdx.x % tiles, e = blockIdx.x / tiles % 2,
                    row = blockIdx.x / tiles / 2, t0 = tile * TILE;
    const long long c = row % C;
    const bf16 *xr = x + row * 2 * L + e * L;
    bf16 *yr = y + row * 2 * L + e * L;
    if (t0 >= l) { // beyond the chunk: zeros
        for (long long t = t0 + threadIdx.x; t < t0 + TILE && t < L; t += THREADS)
            yr[t] = __float2bfloat16(0.f);
        return;
    }
    for (int k = threadIdx.x; k < K; k += THREADS)
        ws[k] = __bfloat162float(w[c * K + k]);
    for (long long p = threadIdx.x; p < TILE + h; p += THREADS) {
        const long long t = t0 + p - h; // position in the chunk of xp[t0 + p]
        float v = 0.f;
        if (t >= 0 && t < l)
            v = __bfloat162float(xr[t]);
        else if (t < 0) {
            const long long k = h + t; // halo element k
            if (e == 0)
                v = halo_a ? __bfloat162float(halo_a[row * h + k]) : 0.f;
            else
                v = halo_b ? __bfloat162float(halo_b[row * h + k])
                           : __bfloat162float(x[row * 2 * L + l - h + k]);
        }
        s[p] = v;
    }
    __syncthreads();
    for (int q = threadIdx.x; q < TILE; q += THREADS) {
        const long long t = t0 + q;
        if (t >= L)
            break;
        float acc = 0.f;
        for (int k = 0; k < K; k++)
            acc = fmaf(ws[k], s[q + k], acc);
        yr[t] = t < l ? __float2bfloat16(acc) : __float2bfloat16(0.f);
    }
}

static unsigned grid_for(long long n) {
    const long long b = (n + 255) / 256;
    return (unsigned)(b < 8192 ? b : 8192);
}

// Baseline, PKB's steps: the chunks' last K-1 elements go to the neighbours (chunk a's to rank
// r+1, chunk b's to rank r-1: PKB's batch_isend_irecv; here grouped NCCL send/recv), then the
// depthwise convolution of [halo; chunk] (PKB's torch.cat and F.conv1d(groups=C)): one kernel
// that stages each tile of the padded chunk in shared memory and sums K products in fp32 per
// output, rounding once, over the capacity L (the length is on the device), zeros beyond it.
static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const int W = ctx->world_size, me = ctx->rank;
    const long long B = call->dims[0], C = call->dims[1], L = call->dims[2], K = call->dims[3];
    const bf16 *x = static_cast<const bf16 *>(call->args[0]);
    const int64_t *len = static_cast<const int64_t *>(call->args[1]);
    const bf16 *w = static_cast<const bf16 *>(call->args[2]);
    bf16 *y = static_cast<bf16 *>(call->args[3]);
    cudaStream_t s = ctx->stream;
    const long long rows = B * C, n = rows * (K - 1);
    int rc = ref_buffers(ctx, 4 * (size_t)n * sizeof(bf16));
    if (rc)
        return rc;
    bf16 *tails = g_ref.halo, *halo_a = g_ref.halo + 2 * n, *halo_b = g_ref.halo + 3 * n;
    pack_tails<<<grid_for(2 * n), 256, 0, s>>>(x, len, tails, rows, L, K);
    rc = cuda_code(cudaGetLastError());
    if (!rc)
        rc = nccl_code(ncclGroupStart());
    if (!rc && me > 0) { // halo_a from rank r-1; our chunk b's tail to it
        rc = nccl_code(ncclRecv(halo_a, (size_t)n, ncclBfloat16, me - 1, ctx->comm, s));
        if (!rc)
            rc = nccl_code(ncclSend(tails + n, (size_t)n, ncclBfloat16, me - 1, ctx->comm, s));
    }
    if (!rc && me < W - 1) { // our chunk a's tail to rank r+1; halo_b from it
        rc = nccl_code(ncclSend(tails, (size_t)n, ncclBfloat16, me + 1, ctx->comm, s));
        if (!rc)
            rc = nccl_code(ncclRecv(halo_b, (size_t)n, ncclBfloat16, me + 1, ctx->comm, s));
    }
    const int end = nccl_code(ncclGroupEnd());
    if (rc || end)
        return rc ? rc : end;
    const long long tiles = (L + TILE - 1) / TILE;
    conv_chunks<<<(unsigned)(rows * 2 * tiles), THREADS, 0, s>>>(
        x, len, w, me > 0 ? halo_a : NULL, me < W - 1 ? halo_b : NULL, y, C, L, K);
    return cuda_code(cudaGetLastError());
}

__global__ void set_i64(int64_t *p, int64_t v) {
    *p = v;
}

// Every rank's chunk length for call `key`, the same on every rank (a function of seed and
// key), in [K-1, L]. Trials (key % 5): 0 PKB's inputs (every rank L); 1 every rank K-1..L; 2 one
// rank K-1 (its halos are whole chunks) and another L, the others K-1..L; 3 odd lengths; 4 every
// rank L/2..L with the first rank one short of L and the last rank K-1 (its chunk b's halo is
// all of its chunk a). The call checked after timing draws like trial 1. Timed calls:
// L - j * (L / (2W)) for j < W, rotated by the key, so every timed call's busiest rank has L
// (meta.json's roofline counts it) while the ragged edges move.
static void chunk_lengths(uint64_t seed, int key, int world, long long L, long long K,
                          long long *len) {
    const uint64_t k = pk_splitmix64(seed ^ pk_splitmix64(0x71ull << 40 ^ (uint64_t)(unsigned)key));
    const auto draw = [&](int j, long long lo, long long hi) { // uniform in [lo, hi]
        return lo + (long long)(pk_splitmix64(k + (uint64_t)j) % (uint64_t)(hi - lo + 1));
    };
    if (key >= KEY_TIMED_BASE) {
        const int shift = (int)(pk_splitmix64(seed ^ 0x71ull) % (uint64_t)world);
        for (int r = 0; r < world; r++)
            len[r] = L - (long long)((r + shift + key) % world) * (L / (2 * world));
        return;
    }
    const int cls = key == KEY_POST_TIMING ? 1 : key % 5;
    for (int r = 0; r < world; r++)
        len[r] = cls == 0 ? L : draw(r, cls == 4 ? (L + 1) / 2 : K - 1, L);
    if (cls == 2 && world > 1) { // W = 1 (the diagnostic) has no second rank
        const int one = (int)draw(100, 0, world - 1);
        len[one] = K - 1;
        len[(one + 1 + (int)draw(101, 0, world - 2)) % world] = L;
    } else if (cls == 3) {
        for (int r = 0; r < world; r++)
            if (len[r] % 2 == 0) // odd, still in [K-1, L] (L >= 2K)
                len[r] += len[r] < L ? 1 : -1;
    } else if (cls == 4) {
        len[0] = L - 1;
        len[world - 1] = K - 1;
    }
}

// len: this rank's chunk length (the generic generator's value is overwritten). x keeps the
// generic draw in every column, the capacity beyond each chunk included: a kernel that reads
// them as a halo reads values, not zeros.
static int generate(const pk_problem_call *call, uint64_t seed, int key) {
    const pk_ctx *ctx = call->ctx;
    long long len[PK_MAX_RANKS];
    chunk_lengths(seed, key, ctx->world_size, call->dims[2], call->dims[3], len);
    set_i64<<<1, 1, 0, ctx->stream>>>(static_cast<int64_t *>(call->args[1]), len[ctx->rank]);
    return cuda_code(cudaGetLastError());
}

static int invoke(void *fn, const pk_problem_call *c) {
    if (!fn || c->n_args != 4 || c->n_dims < 4)
        return -1;
    return reinterpret_cast<entry_fn>(fn)(
        c->ctx, static_cast<const bf16 *>(c->args[0]), static_cast<const int64_t *>(c->args[1]),
        static_cast<const bf16 *>(c->args[2]), static_cast<bf16 *>(c->args[3]), (size_t)c->dims[0],
        (size_t)c->dims[1], (size_t)c->dims[2], (size_t)c->dims[3]);
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, invoke, generate, NULL, fini, NULL};
    return &module;
}
