// pkb/77_magi1_cso_async_attention: ParallelKernelBench problem 77
// (reference/77_magi1_cso_async_attention.py), MAGI-1's context-shuffle-overlap (CSO) attention.
// Every rank holds R = cp_shuffle_num ranges of SPB tokens (T = R SPB tokens): query
// (T, HQ, 128) and the packed key_value (T, HKV, 256) = cat([key, value], -1). The keys of range
// i are the tokens [i SPB, (i + 1) SPB) of ranks 0, 1, ..., W - 1 concatenated in rank order, the
// first CLIP of them (clip_token_nums); every rank must produce, for each of its tokens, the
// non-causal attention (scale 1/sqrt(128)) of its query over the keys of its range, query head h
// reading key/value head h / (HQ / HKV). PKB gets there with three all-to-alls (kv by heads,
// queries by heads, outputs back) around one SDPA per range.
#include "pk_problem_module.h"

#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>

#include "pk_attention.cuh"

typedef __nv_bfloat16 bf16;
typedef int (*entry_fn)(const pk_ctx *, const bf16 *, const bf16 *, const int64_t *, bf16 *, size_t,
                        size_t, size_t, size_t, size_t, size_t);

// meta.json's dims, in order.
enum { D_R, D_HQ, D_HKV, D_D, D_N, D_SPB, D_CLIP, D_T, D_COUNT };
#define HD 128 // the head dim (meta.json's constraint D == 128)

static int nccl_code(ncclResult_t r) {
    return r == ncclSuccess ? 0 : 1000 + (int)r;
}

static int cuda_code(cudaError_t e) {
    return e == cudaSuccess ? 0 : 2000 + (int)e;
}

// The reference's buffers, in one allocation (bf16 elements): qa (T HQ D: the packed queries,
// then the attention's output), qb (T HQ D: the received queries range-major, then the received
// outputs source-major), kva (T HKV 2D: the packed key_value), kvb (R CLIP HKV/W 2D at most
// T HKV 2D: the received keys range-major, PKB's _kv_by_range). ncclMemAlloc'ed and registered
// as an NCCL window (host send/recv between the windowed arena and plain cudaMalloc memory hangs
// in NCCL 2.28.3: docs/problems.md, known issues); plain cudaMalloc at W = 1, where no NCCL call
// is made. Made in the first reference call (an untimed correctness trial that every rank makes:
// registration is collective).
static struct {
    void *ptr;
    size_t bytes;
    ncclWindow_t win;
    int windowed;
} g_work;

static void work_free(const pk_ctx *ctx) {
    if (g_work.ptr) {
        if (g_work.windowed) {
            ncclCommWindowDeregister(ctx->comm, g_work.win);
            ncclMemFree(g_work.ptr);
        } else {
            cudaFree(g_work.ptr);
        }
    }
    g_work.ptr = NULL;
    g_work.bytes = 0;
}

static int work_reserve(const pk_ctx *ctx, size_t bytes) {
    if (g_work.bytes >= bytes)
        return 0;
    if (cudaStreamSynchronize(ctx->stream) != cudaSuccess)
        return 2001;
    work_free(ctx);
    int rc;
    if (ctx->world_size > 1) {
        rc = nccl_code(ncclMemAlloc(&g_work.ptr, bytes));
        if (!rc)
            rc = nccl_code(ncclCommWindowRegister(ctx->comm, g_work.ptr, bytes, &g_work.win,
                                                  NCCL_WIN_COLL_SYMMETRIC));
        g_work.windowed = 1;
    } else {
        rc = cuda_code(cudaMalloc(&g_work.ptr, bytes));
        g_work.windowed = 0;
    }
    if (!rc)
        g_work.bytes = bytes;
    return rc;
}

// query (T, HQ, D) -> qa[g][token][h] (HL heads of group g = hq / HL), 16-byte vectors.
__global__ void pack_heads(const uint4 *src, uint4 *dst, size_t T, int heads, int group_heads,
                           int row_vecs) {
    const size_t n = T * heads * row_vecs;
    for (size_t o = (size_t)blockIdx.x * blockDim.x + threadIdx.x; o < n;
         o += (size_t)gridDim.x * blockDim.x) {
        const size_t c = o % row_vecs, hh = o / row_vecs % heads, t = o / row_vecs / heads;
        const size_t g = hh / group_heads, h = hh % group_heads;
        dst[((g * T + t) * group_heads + h) * row_vecs + c] = src[o];
    }
}

// qb[s][token][h] (the outputs received from the owner s of head group s) -> out (T, HQ, D).
__global__ void unpack_heads(const uint4 *src, uint4 *dst, size_t T, int heads, int group_heads,
                             int row_vecs) {
    const size_t n = T * heads * row_vecs;
    for (size_t o = (size_t)blockIdx.x * blockDim.x + threadIdx.x; o < n;
         o += (size_t)gridDim.x * blockDim.x) {
        const size_t c = o % row_vecs, hh = o / row_vecs % heads, t = o / row_vecs / heads;
        const size_t g = hh / group_heads, h = hh % group_heads;
        dst[o] = src[((g * T + t) * group_heads + h) * row_vecs + c];
    }
}

__global__ void set_ranges(int64_t *k_ranges, int R, long long clip) {
    const int i = threadIdx.x;
    if (i < R) {
        k_ranges[2 * i] = (int64_t)i * clip;
        k_ranges[2 * i + 1] = (int64_t)(i + 1) * clip;
    }
}

// Keys rank s contributes to each range: its SPB tokens, less what the clip drops.
static long long seg_keys(int s, long long spb, long long clip) {
    const long long n = clip - (long long)s * spb;
    return n < 0 ? 0 : n > spb ? spb : n;
}

// One NCCL send (or receive) of `count` bf16 elements to (from) `peer`, inside a group; nothing
// for an empty message. A rank's own parts are device copies (no NCCL call at W = 1).
static int xfer(const pk_ctx *ctx, const bf16 *src, size_t count, int peer, bool send) {
    if (!count)
        return 0;
    return nccl_code(send ? ncclSend(src, count, ncclBfloat16, peer, ctx->comm, ctx->stream)
                          : ncclRecv(const_cast<bf16 *>(src), count, ncclBfloat16, peer, ctx->comm,
                                     ctx->stream));
}

// Baseline: PKB's steps one after another (no overlap; PKB pipelines each range's output
// all-to-all with the next range's queries, which moves the same bytes).
//  1. _redistribute_kv: pack key_value by head group; all-to-all (grouped NCCL send/recv) so
//     that rank r gets key/value heads [r KL, (r + 1) KL) of every rank's tokens, received
//     straight into PKB's _kv_by_range layout (range-major, rank order, clipped: the tokens the
//     clip drops are not sent).
//  2. _split_query + the query all-to-all: rank r gets query heads [r HL, (r + 1) HL) of every
//     rank's tokens, range-major: range i's W SPB queries in rank order.
//  3. _sdpa: one launch of pk_attention.cuh's flash-style tile (D = 128: bf16 tensor cores, fp32
//     scores and online softmax, P in bf16 for PV, fp32 accumulation, the score matrix never in
//     memory; non-causal, grouped-query through Hkv, the packed key_value through hs_kv), batch =
//     the R ranges (each range's queries against its CLIP keys).
//  4. The output all-to-all back to the queries' ranks and _restore_output (unpack by heads).
static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const int W = ctx->world_size, rank = ctx->rank;
    const long long *d = call->dims;
    const int R = (int)d[D_R], HQ = (int)d[D_HQ], HKV = (int)d[D_HKV];
    const long long SPB = d[D_SPB], CLIP = d[D_CLIP], T = d[D_T];
    if (d[D_D] != HD || HQ % W || HKV % W || CLIP < 1 || CLIP > W * SPB)
        return 1;
    const int HL = HQ / W, KL = HKV / W;
    const size_t nq = (size_t)T * HQ * HD, nkv = (size_t)T * HKV * 2 * HD;
    int rc = work_reserve(ctx, (2 * nq + 2 * nkv) * sizeof(bf16));
    if (rc)
        return rc;
    bf16 *qa = static_cast<bf16 *>(g_work.ptr), *qb = qa + nq, *kva = qb + nq, *kvb = kva + nkv;
    const bf16 *query = static_cast<const bf16 *>(call->args[0]);
    const bf16 *kv = static_cast<const bf16 *>(call->args[1]);
    bf16 *out = static_cast<bf16 *>(call->args[3]);
    cudaStream_t st = ctx->stream;
    const int blocks = 4 * 132;

    // 1. key_value by head group, into kvb[i][s SPB + t] (range-major, clipped).
    pack_heads<<<blocks, 256, 0, st>>>(reinterpret_cast<const uint4 *>(kv),
                                       reinterpret_cast<uint4 *>(kva), (size_t)T, HKV, KL,
                                       2 * HD / 8);
    pack_heads<<<blocks, 256, 0, st>>>(reinterpret_cast<const uint4 *>(query),
                                       reinterpret_cast<uint4 *>(qa), (size_t)T, HQ, HL, HD / 8);
    if ((rc = cuda_code(cudaGetLastError())))
        return rc;
    const size_t kv_tok = (size_t)KL * 2 * HD, q_tok = (size_t)HL * HD; // per token, per group
    const long long mine = seg_keys(rank, SPB, CLIP);
    // Own parts: device copies.
    for (int i = 0; i < R; i++) {
        if (mine)
            rc = cuda_code(cudaMemcpyAsync(kvb + ((size_t)i * CLIP + (size_t)rank * SPB) * kv_tok,
                                           kva + ((size_t)rank * T + (size_t)i * SPB) * kv_tok,
                                           (size_t)mine * kv_tok * sizeof(bf16),
                                           cudaMemcpyDeviceToDevice, st));
        if (!rc)
            rc = cuda_code(cudaMemcpyAsync(qb + ((size_t)i * W + rank) * SPB * q_tok,
                                           qa + ((size_t)rank * T + (size_t)i * SPB) * q_tok,
                                           (size_t)SPB * q_tok * sizeof(bf16),
                                           cudaMemcpyDeviceToDevice, st));
        if (rc)
            return rc;
    }
    // 1 and 2: the peers' parts, one NCCL group (messages between a pair match in order).
    if (W > 1) {
        rc = nccl_code(ncclGroupStart());
        for (int p = 0; p < W && !rc; p++) {
            if (p == rank)
                continue;
            const long long theirs = seg_keys(p, SPB, CLIP);
            for (int i = 0; i < R && !rc; i++) {
                rc = xfer(ctx, kva + ((size_t)p * T + (size_t)i * SPB) * kv_tok,
                          (size_t)mine * kv_tok, p, true);
                if (!rc)
                    rc = xfer(ctx, kvb + ((size_t)i * CLIP + (size_t)p * SPB) * kv_tok,
                              (size_t)theirs * kv_tok, p, false);
                if (!rc)
                    rc = xfer(ctx, qa + ((size_t)p * T + (size_t)i * SPB) * q_tok,
                              (size_t)SPB * q_tok, p, true);
                if (!rc)
                    rc = xfer(ctx, qb + ((size_t)i * W + p) * SPB * q_tok, (size_t)SPB * q_tok, p,
                              false);
            }
        }
        const int end = nccl_code(ncclGroupEnd());
        if (rc || end)
            return rc ? rc : end;
    }

    // 3. Attention, the R ranges as the batch: queries qb (R, W SPB, HL, D), keys kvb
    //    (R, CLIP, KL, 2D), output into qa (R, W SPB, HL, D) (the packed queries are sent).
    PkAttnBlock a = {};
    a.q = qb;
    a.k = kvb;
    a.v = kvb + HD;
    a.B = R;
    a.Sq = (int)(W * SPB);
    a.Sk = (int)CLIP;
    a.H = HL;
    a.Hkv = KL;
    a.ld_kv = (long long)KL * 2 * HD;
    a.hs_kv = 2 * HD;
    a.causal = 0;
    a.scale = (float)(1.0 / sqrt((double)HD)); // SDPA's default
    a.out_bf16 = qa;
    if ((rc = cuda_code(pk_attn_fwd_launch<HD>(a, st))))
        return rc;

    // 4. Outputs back: range i's rows [p SPB, (p + 1) SPB) to rank p, into qb[s][token].
    for (int i = 0; i < R && !rc; i++)
        rc = cuda_code(cudaMemcpyAsync(qb + ((size_t)rank * T + (size_t)i * SPB) * q_tok,
                                       qa + ((size_t)i * W + rank) * SPB * q_tok,
                                       (size_t)SPB * q_tok * sizeof(bf16), cudaMemcpyDeviceToDevice,
                                       st));
    if (rc)
        return rc;
    if (W > 1) {
        rc = nccl_code(ncclGroupStart());
        for (int p = 0; p < W && !rc; p++) {
            if (p == rank)
                continue;
            for (int i = 0; i < R && !rc; i++) {
                rc =
                    xfer(ctx, qa + ((size_t)i * W + p) * SPB * q_tok, (size_t)SPB * q_tok, p, true);
                if (!rc)
                    rc = xfer(ctx, qb + ((size_t)p * T + (size_t)i * SPB) * q_tok,
                              (size_t)SPB * q_tok, p, false);
            }
        }
        const int end = nccl_code(ncclGroupEnd());
        if (rc || end)
            return rc ? rc : end;
    }
    unpack_heads<<<blocks, 256, 0, st>>>(reinterpret_cast<const uint4 *>(qb),
                                         reinterpret_cast<uint4 *>(out), (size_t)T, HQ, HL, HD / 8);
    return cuda_code(cudaGetLastError());
}

// k_ranges: PKB's [i CLIP, (i + 1) CLIP) per range (input_output_tensors.py), the same on every
// rank and in every call (the contract says so); the generic generator's values are replaced.
static int generate(const pk_problem_call *call, uint64_t seed, int trial) {
    (void)seed;
    (void)trial;
    const int R = (int)call->dims[D_R];
    set_ranges<<<1, 32 * ((R + 31) / 32), 0, call->ctx->stream>>>(
        static_cast<int64_t *>(call->args[2]), R, call->dims[D_CLIP]);
    return cuda_code(cudaGetLastError());
}

static void fini(const pk_ctx *ctx) {
    work_free(ctx);
}

static int invoke(void *fn, const pk_problem_call *c) {
    if (!fn || c->n_args != 4 || c->n_dims < D_COUNT)
        return -1;
    return reinterpret_cast<entry_fn>(fn)(
        c->ctx, static_cast<const bf16 *>(c->args[0]), static_cast<const bf16 *>(c->args[1]),
        static_cast<const int64_t *>(c->args[2]), static_cast<bf16 *>(c->args[3]),
        (size_t)c->dims[D_T], (size_t)c->dims[D_HQ], (size_t)c->dims[D_HKV], (size_t)c->dims[D_D],
        (size_t)c->dims[D_R], (size_t)c->dims[D_CLIP]);
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, invoke, generate, NULL, fini, NULL};
    return &module;
}
