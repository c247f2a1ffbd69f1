// pk_ulysses.cuh: what the references of the Ulysses layout problems (pkb/36-38) share: a
// registered work buffer for host-driven NCCL, the grouped send/recv of the W - 1 remote chunks
// (PKB's dist.all_to_all), and the custom checker of an output whose used part is a prefix of
// its capacity (the sequence length or unpadded size is a per-call parameter).
//
// Prompt: the all-to-all as host-driven grouped ncclSend/ncclRecv over a registered buffer, and the
// checker of variable-length outputs.
#ifndef PK_ULYSSES_CUH
#define PK_ULYSSES_CUH

#include "pk_problem_module.h"

#include <cuda_bf16.h>
#include <math.h>

static inline int pk_uly_nccl(ncclResult_t r) {
    return r == ncclSuccess ? 0 : 1000 + (int)r;
}

static inline int pk_uly_cuda(cudaError_t e) {
    return e == cudaSuccess ? 0 : 2000 + (int)e;
}

// ncclMemAlloc'ed and registered as an NCCL window, as the harness makes its own buffers
// (host-driven ncclSend/ncclRecv between the windowed arena and plain cudaMalloc memory hangs
// in NCCL 2.28.3: docs/problems.md, known issues). Reserved in the first reference call (init()
// does not know the dims), an untimed correctness trial that every rank makes: registration is
// collective, and every rank asks for the same size.
struct PkUlyWork {
    void *ptr;
    size_t bytes;
    ncclWindow_t win;
};

static inline void pk_uly_work_free(const pk_ctx *ctx, PkUlyWork *w) {
    if (w->ptr) {
        ncclCommWindowDeregister(ctx->comm, w->win);
        ncclMemFree(w->ptr);
    }
    w->ptr = NULL;
    w->bytes = 0;
}

static inline int pk_uly_work_reserve(const pk_ctx *ctx, PkUlyWork *w, size_t bytes) {
    if (w->bytes >= bytes)
        return 0;
    if (cudaStreamSynchronize(ctx->stream) != cudaSuccess)
        return 2001;
    pk_uly_work_free(ctx, w);
    int rc = pk_uly_nccl(ncclMemAlloc(&w->ptr, bytes));
    if (!rc)
        rc = pk_uly_nccl(
            ncclCommWindowRegister(ctx->comm, w->ptr, bytes, &w->win, NCCL_WIN_COLL_SYMMETRIC));
    if (!rc)
        w->bytes = bytes;
    return rc;
}

// PKB's dist.all_to_all of equal chunks: chunk q of `send` goes to rank q, chunk q of `recv`
// comes from rank q (`chunk` elements each), one NCCL group, our own chunk not moved (the
// references read it straight from x).
static inline int pk_uly_exchange(const pk_ctx *ctx, const __nv_bfloat16 *send, __nv_bfloat16 *recv,
                                  size_t chunk) {
    int rc = pk_uly_nccl(ncclGroupStart());
    for (int q = 0; q < ctx->world_size && !rc; q++) {
        if (q == ctx->rank || !chunk)
            continue;
        rc = pk_uly_nccl(
            ncclSend(send + (size_t)q * chunk, chunk, ncclBfloat16, q, ctx->comm, ctx->stream));
        if (!rc)
            rc = pk_uly_nccl(
                ncclRecv(recv + (size_t)q * chunk, chunk, ncclBfloat16, q, ctx->comm, ctx->stream));
    }
    const int end = pk_uly_nccl(ncclGroupEnd());
    return rc ? rc : end;
}

// The custom checker: the first n elements of output `arg` bit for bit against the
// reference's; the rest of its capacity is not output.
static unsigned long long *g_uly_bad; // device: the first bad index, ~0 if none

__global__ void pk_uly_compare(const uint16_t *got, const uint16_t *want, size_t n,
                               unsigned long long *bad) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        if (got[i] != want[i]) {
            atomicMin(bad, (unsigned long long)i);
            return;
        }
}

static inline int pk_uly_check_init(void) {
    return pk_uly_cuda(cudaMalloc((void **)&g_uly_bad, sizeof *g_uly_bad));
}

static inline void pk_uly_check_fini(void) {
    cudaFree(g_uly_bad);
    g_uly_bad = NULL;
}

static inline int pk_uly_check_prefix(const pk_problem_call *want, const pk_problem_call *got,
                                      int arg, size_t n, pk_check_report *out) {
    cudaStream_t s = got->ctx->stream;
    if (n > got->counts[arg])
        return 3001;
    unsigned long long bad = ~0ull;
    int rc = pk_uly_cuda(cudaMemsetAsync(g_uly_bad, 0xff, sizeof *g_uly_bad, s));
    if (!rc && n) {
        pk_uly_compare<<<4 * 132, 256, 0, s>>>(static_cast<const uint16_t *>(got->args[arg]),
                                               static_cast<const uint16_t *>(want->args[arg]), n,
                                               g_uly_bad);
        rc = pk_uly_cuda(cudaGetLastError());
    }
    if (!rc)
        rc = pk_uly_cuda(cudaMemcpyAsync(&bad, g_uly_bad, sizeof bad, cudaMemcpyDeviceToHost, s));
    if (!rc)
        rc = pk_uly_cuda(cudaStreamSynchronize(s));
    if (rc)
        return rc;
    out->passed = bad == ~0ull;
    out->bad_index = out->passed ? -1 : (long long)bad;
    out->expected = out->got = out->max_abs = out->max_rel = 0;
    if (!out->passed) {
        __nv_bfloat16 e, g;
        rc = pk_uly_cuda(cudaMemcpy(&e, static_cast<const __nv_bfloat16 *>(want->args[arg]) + bad,
                                    sizeof e, cudaMemcpyDeviceToHost));
        if (!rc)
            rc =
                pk_uly_cuda(cudaMemcpy(&g, static_cast<const __nv_bfloat16 *>(got->args[arg]) + bad,
                                       sizeof g, cudaMemcpyDeviceToHost));
        out->expected = __bfloat162float(e);
        out->got = __bfloat162float(g);
        out->max_abs = fabs(out->got - out->expected);
    }
    return rc;
}

// PKB's unpadding (36, 38): `unpadded_dim_size` and unpadded_dim_size % W != 0 keeps the first
// unpadded_dim_size positions of the gathered sequence (W S of them), else all of them. Valid
// values are 0..W S (larger ones PKB would slice oddly: refused); -1 for an invalid one.
static inline long long pk_uly_unpadded_len(long long unpadded, int world, long long S) {
    if (unpadded < 0 || unpadded > (long long)world * S)
        return -1;
    return unpadded && unpadded % world ? unpadded : (long long)world * S;
}

// ---- Gather the sequence, scatter the features (36: G = 1 group of H D; 38: q, k, v) ----
// Rank r holds x (B, S, G, Fg); chunk q of a row is [q Cw, (q+1) Cw) of every group, Cw = Fg / W.
// Every rank needs y (B, Useq, G, Cw): y[b, q S + s, g, c] = x_q[b, s, g, r Cw + c] for
// q S + s < Useq. Counted in 16-byte vectors (Cw % 8 == 0).
#define PK_ULY_THREADS 256

// tensor_split(x, W, dim=features)[q].contiguous() for every remote q: send (W, B S, G, Cw).
__global__ void __launch_bounds__(PK_ULY_THREADS)
    pk_uly_pack_features(const uint4 *x, uint4 *send, int rank, int world, size_t rows, int G,
                         size_t fg_vecs, size_t cw_vecs) {
    const size_t per = rows * (size_t)G * cw_vecs, n = per * (size_t)world,
                 stride = (size_t)gridDim.x * PK_ULY_THREADS;
    for (size_t o = (size_t)blockIdx.x * PK_ULY_THREADS + threadIdx.x; o < n; o += stride) {
        const size_t q = o / per, e = o % per, c = e % cw_vecs, rg = e / cw_vecs;
        if ((int)q != rank)
            send[o] = x[rg * fg_vecs + q * cw_vecs + c];
    }
}

// torch.cat(received, dim=seq), then the unpadding slice: y (B, Useq, G, Cw), our own chunk
// straight from x.
__global__ void __launch_bounds__(PK_ULY_THREADS)
    pk_uly_unpack_seq(const uint4 *x, const uint4 *recv, uint4 *y, int rank, size_t B, size_t S,
                      size_t useq, int G, size_t fg_vecs, size_t cw_vecs) {
    const size_t row_vecs = (size_t)G * cw_vecs, n = B * useq * row_vecs, per = B * S * row_vecs,
                 stride = (size_t)gridDim.x * PK_ULY_THREADS;
    for (size_t o = (size_t)blockIdx.x * PK_ULY_THREADS + threadIdx.x; o < n; o += stride) {
        const size_t v = o % row_vecs, t = (o / row_vecs) % useq, b = o / row_vecs / useq;
        const size_t q = t / S, row = b * S + t % S, g = v / cw_vecs, c = v % cw_vecs;
        y[o] = (int)q == rank ? x[(row * G + g) * fg_vecs + rank * cw_vecs + c]
                              : recv[q * per + row * row_vecs + v];
    }
}

// The baseline of 36 and 38, PKB's steps: the W - 1 remote feature chunks made contiguous
// (tensor_split + .contiguous()), grouped NCCL send/recv (dist.all_to_all), then torch.cat
// along the sequence with the unpadding slice as one kernel that also reads our own chunk from x
// (PKB's own chunk goes through NCCL's local copy; skipping it only helps the baseline).
static inline int pk_uly_gather_seq_reference(const pk_problem_call *call, PkUlyWork *work,
                                              size_t B, size_t S, int G, size_t Fg,
                                              long long useq) {
    const pk_ctx *ctx = call->ctx;
    const int world = ctx->world_size, rank = ctx->rank;
    if (useq < 0 || Fg % ((size_t)world * 8) != 0)
        return 3001;
    const size_t cw = Fg / (size_t)world, chunk = B * S * (size_t)G * cw; // elements per rank
    int rc = pk_uly_work_reserve(ctx, work, 2 * (size_t)world * chunk * sizeof(__nv_bfloat16));
    if (rc)
        return rc;
    const uint4 *x = static_cast<const uint4 *>(call->args[0]);
    __nv_bfloat16 *send = static_cast<__nv_bfloat16 *>(work->ptr),
                  *recv = send + (size_t)world * chunk;
    pk_uly_pack_features<<<4 * 132, PK_ULY_THREADS, 0, ctx->stream>>>(
        x, reinterpret_cast<uint4 *>(send), rank, world, B * S, G, Fg / 8, cw / 8);
    rc = pk_uly_cuda(cudaGetLastError());
    if (!rc)
        rc = pk_uly_exchange(ctx, send, recv, chunk);
    if (rc)
        return rc;
    pk_uly_unpack_seq<<<4 * 132, PK_ULY_THREADS, 0, ctx->stream>>>(
        x, reinterpret_cast<const uint4 *>(recv), static_cast<uint4 *>(call->args[1]), rank, B, S,
        (size_t)useq, G, Fg / 8, cw / 8);
    return pk_uly_cuda(cudaGetLastError());
}

#endif
