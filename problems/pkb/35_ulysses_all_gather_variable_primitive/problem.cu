// pkb/35_ulysses_all_gather_variable_primitive (ParallelKernelBench problem 35): an all-gather
// of shards whose row counts differ per rank (zero included), concatenated along dim 0. Rank r
// holds rows = len_r (its own count only) and x (M x N capacity; rows [0, len_r) are its shard)
// and every rank needs
//   y[(off_q + i) * N + c] = x_q[i * N + c]    off_q = len_0 + ... + len_{q-1}, i < len_q
//   total = len_0 + ... + len_{W-1}
// (PKB: an all-gather of the sizes, then an all-gather of tensors of different sizes and
// torch.cat(dim=0)). Only y's first total rows are checked (check() below): the rest of its
// W*M-row capacity is not part of the output.
#include "pk_problem_module.h"
#include "pk_splitmix.h"

#include <cuda_bf16.h>
#include <math.h>

typedef int (*entry_fn)(const pk_ctx *, const __nv_bfloat16 *, const int64_t *, __nv_bfloat16 *,
                        int64_t *, size_t, size_t);

// The runner's call keys (problems/runner/pk_runner.h): trials count from 0, the call checked
// after timing is KEY_POST_TIMING, timed calls start at KEY_TIMED_BASE.
#define KEY_POST_TIMING (1 << 20)
#define KEY_TIMED_BASE (1 << 21)

static int cuda_code(cudaError_t e) {
    return e == cudaSuccess ? 0 : 2000 + (int)e;
}

static int nccl_code(ncclResult_t r) {
    return r == ncclSuccess ? 0 : 1000 + (int)r;
}

// Every rank's row count, gathered (NCCL moves it between registered windows: host-driven NCCL
// between the windowed arena and plain cudaMalloc memory hangs in NCCL 2.28.3, docs/problems.md,
// known issues), and its pinned host copy. Made in init(): registration is collective.
static struct {
    int64_t *lens;
    ncclWindow_t win;
    int64_t *host;
} g_ref;

// A 64-bit value set on the device in stream order (no pageable host source to outlive).
__global__ void set_i64(int64_t *p, int64_t v) {
    *p = v;
}

__global__ void sum_lens(const int64_t *lens, int world, int64_t *total) {
    int64_t s = 0;
    for (int q = 0; q < world; q++)
        s += lens[q];
    *total = s;
}

// Baseline, PKB's steps: an all-gather of the row counts, a host sync for them (PKB's
// .tolist()), then the shards moved straight into their rows of y by grouped NCCL send/recv
// (PKB's uneven all_gather and torch.cat in one, full duplex) and our own by a local copy.
static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const int world = ctx->world_size, me = ctx->rank;
    const long long M = call->dims[0], N = call->dims[1];
    const __nv_bfloat16 *x = static_cast<const __nv_bfloat16 *>(call->args[0]);
    __nv_bfloat16 *y = static_cast<__nv_bfloat16 *>(call->args[2]);
    int rc =
        nccl_code(ncclAllGather(call->args[1], g_ref.lens, 1, ncclInt64, ctx->comm, ctx->stream));
    if (!rc)
        rc = cuda_code(cudaMemcpyAsync(g_ref.host, g_ref.lens, (size_t)world * sizeof(int64_t),
                                       cudaMemcpyDeviceToHost, ctx->stream));
    if (!rc)
        rc = cuda_code(cudaStreamSynchronize(ctx->stream));
    if (rc)
        return rc;
    long long off[PK_MAX_RANKS], acc = 0;
    for (int q = 0; q < world; q++) {
        if (g_ref.host[q] < 0 || g_ref.host[q] > M)
            return 3001; // not a valid row count
        off[q] = acc;
        acc += g_ref.host[q];
    }
    const size_t mine = (size_t)g_ref.host[me] * (size_t)N;
    if (mine)
        rc = cuda_code(cudaMemcpyAsync(y + (size_t)off[me] * N, x, mine * sizeof(__nv_bfloat16),
                                       cudaMemcpyDeviceToDevice, ctx->stream));
    if (!rc)
        rc = nccl_code(ncclGroupStart());
    for (int q = 0; q < world && !rc; q++) {
        if (q == me)
            continue;
        if (mine)
            rc = nccl_code(ncclSend(x, mine, ncclBfloat16, q, ctx->comm, ctx->stream));
        const size_t theirs = (size_t)g_ref.host[q] * (size_t)N;
        if (!rc && theirs)
            rc = nccl_code(
                ncclRecv(y + (size_t)off[q] * N, theirs, ncclBfloat16, q, ctx->comm, ctx->stream));
    }
    const int end = nccl_code(ncclGroupEnd());
    if (rc || end)
        return rc ? rc : end;
    sum_lens<<<1, 1, 0, ctx->stream>>>(g_ref.lens, world, static_cast<int64_t *>(call->args[3]));
    return cuda_code(cudaGetLastError());
}

// Every rank's row count for call `key`, the same on every rank (a function of seed and key).
// Trials (key % 5): 0 one rank empty and one full, the others 1..M; 1 PKB's inputs (every rank
// M rows); 2 every rank 0..M; 3 rank 0 empty and the last rank one row, the others 0..M; 4 odd
// counts 1..M. The call checked after timing draws like trial 0. Timed calls: the counts
// M - j * (M / (2W)) for j < W, rotated by the key, so every timed call moves the same bytes
// (meta.json's roofline counts exactly these) while which rank holds how many changes.
static void row_counts(uint64_t seed, int key, int world, long long M, long long *len) {
    const uint64_t k = pk_splitmix64(seed ^ pk_splitmix64(0x35ull << 40 ^ (uint64_t)(unsigned)key));
    const auto draw = [&](int j, long long lo, long long hi) { // uniform in [lo, hi]
        return lo + (long long)(pk_splitmix64(k + (uint64_t)j) % (uint64_t)(hi - lo + 1));
    };
    if (key >= KEY_TIMED_BASE) {
        const int shift = (int)(pk_splitmix64(seed ^ 0x35ull) % (uint64_t)world);
        for (int r = 0; r < world; r++)
            len[r] = M - (long long)((r + shift + key) % world) * (M / (2 * world));
        return;
    }
    const int cls = key == KEY_POST_TIMING ? 0 : key % 5;
    for (int r = 0; r < world; r++)
        len[r] = cls == 1 ? M : draw(r, cls == 0 || cls == 4 ? 1 : 0, M);
    if (cls == 0 && world > 1) { // W = 1 (the diagnostic) has no second rank
        const int empty = (int)draw(100, 0, world - 1);
        len[empty] = 0;
        len[(empty + 1 + (int)draw(101, 0, world - 2)) % world] = M;
    } else if (cls == 3) {
        len[0] = 0;
        len[world - 1] = 1;
    } else if (cls == 4) {
        for (int r = 0; r < world; r++)
            len[r] -= len[r] % 2 == 0; // odd, still in [1, M]
    }
}

// rows: this rank's count (the generic generator's value is overwritten).
static int generate(const pk_problem_call *call, uint64_t seed, int key) {
    const pk_ctx *ctx = call->ctx;
    long long len[PK_MAX_RANKS];
    row_counts(seed, key, ctx->world_size, call->dims[0], len);
    set_i64<<<1, 1, 0, ctx->stream>>>(static_cast<int64_t *>(call->args[1]), len[ctx->rank]);
    return cuda_code(cudaGetLastError());
}

// check(): the first mismatching element of y among the first total * N (bit for bit).
static unsigned long long *g_bad; // device: the first bad index, ~0 if none

__global__ void compare_rows(const uint16_t *got, const uint16_t *want, size_t n,
                             unsigned long long *bad) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        if (got[i] != want[i]) {
            atomicMin(bad, (unsigned long long)i);
            return;
        }
}

static int check(const pk_problem_call *want, const pk_problem_call *got, int arg,
                 pk_check_report *out) {
    if (arg != 2)
        return -1;
    cudaStream_t s = got->ctx->stream;
    int64_t total = 0;
    unsigned long long bad = ~0ull;
    int rc =
        cuda_code(cudaMemcpyAsync(&total, want->args[3], sizeof total, cudaMemcpyDeviceToHost, s));
    if (!rc)
        rc = cuda_code(cudaMemsetAsync(g_bad, 0xff, sizeof *g_bad, s));
    if (!rc)
        rc = cuda_code(cudaStreamSynchronize(s));
    if (rc)
        return rc;
    const size_t n = (size_t)total * (size_t)got->dims[1];
    if (total < 0 || n > got->counts[2])
        return 3001;
    if (n) {
        compare_rows<<<4 * 132, 256, 0, s>>>(static_cast<const uint16_t *>(got->args[2]),
                                             static_cast<const uint16_t *>(want->args[2]), n,
                                             g_bad);
        rc = cuda_code(cudaGetLastError());
    }
    if (!rc)
        rc = cuda_code(cudaMemcpyAsync(&bad, g_bad, sizeof bad, cudaMemcpyDeviceToHost, s));
    if (!rc)
        rc = cuda_code(cudaStreamSynchronize(s));
    if (rc)
        return rc;
    out->passed = bad == ~0ull;
    out->bad_index = out->passed ? -1 : (long long)bad;
    out->expected = out->got = out->max_abs = out->max_rel = 0;
    if (!out->passed) {
        __nv_bfloat16 e, g;
        rc = cuda_code(cudaMemcpy(&e, static_cast<const __nv_bfloat16 *>(want->args[2]) + bad,
                                  sizeof e, cudaMemcpyDeviceToHost));
        if (!rc)
            rc = cuda_code(cudaMemcpy(&g, static_cast<const __nv_bfloat16 *>(got->args[2]) + bad,
                                      sizeof g, cudaMemcpyDeviceToHost));
        out->expected = __bfloat162float(e);
        out->got = __bfloat162float(g);
        out->max_abs = fabs(out->got - out->expected);
    }
    return rc;
}

static int init(const pk_ctx *ctx) {
    const size_t bytes = PK_MAX_RANKS * sizeof(int64_t);
    int rc = nccl_code(ncclMemAlloc((void **)&g_ref.lens, bytes));
    if (!rc)
        rc = nccl_code(ncclCommWindowRegister(ctx->comm, g_ref.lens, bytes, &g_ref.win,
                                              NCCL_WIN_COLL_SYMMETRIC));
    if (!rc)
        rc = cuda_code(cudaMallocHost((void **)&g_ref.host, bytes));
    if (!rc)
        rc = cuda_code(cudaMalloc((void **)&g_bad, sizeof *g_bad));
    return rc;
}

static void fini(const pk_ctx *ctx) {
    if (g_ref.lens) {
        ncclCommWindowDeregister(ctx->comm, g_ref.win);
        ncclMemFree(g_ref.lens);
    }
    if (g_ref.host)
        cudaFreeHost(g_ref.host);
    cudaFree(g_bad);
    g_ref.lens = NULL;
    g_ref.host = NULL;
    g_bad = NULL;
}

static int invoke(void *fn, const pk_problem_call *c) {
    if (!fn || c->n_args != 4 || c->n_dims < 2)
        return -1;
    return reinterpret_cast<entry_fn>(fn)(
        c->ctx, static_cast<const __nv_bfloat16 *>(c->args[0]),
        static_cast<const int64_t *>(c->args[1]), static_cast<__nv_bfloat16 *>(c->args[2]),
        static_cast<int64_t *>(c->args[3]), (size_t)c->dims[0], (size_t)c->dims[1]);
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, invoke, generate, init, fini, check};
    return &module;
}
