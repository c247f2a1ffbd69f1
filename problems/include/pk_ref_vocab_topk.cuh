// The reference library's vocab-parallel top-k/top-p block, shared by pkb/82, 83 and 84 (one
// module each, one translation unit each: static definitions are safe here). It holds PKB's
// _apply_top_k_top_p filter as a per-token kernel (stable ascending sort, keep >= the k-th
// largest, bf16 softmax and cumulative sum, keep where it exceeds 1 - top_p, last position
// kept), the admissible-cut analysis check() uses (outputs are not unique: ties at the cut and
// cumulative sums within rounding of the threshold), the all-to-all over the reference's NCCL
// window, the input generator and the checker's error accumulation. Each problem.cu keeps its
// own output layout, reference driver and comparison kernel.
//
// Prompt: the top-k/top-p filter as a per-token kernel (sort, bf16 softmax, cumulative sum), the
// all-to-all over NCCL, and the checker's admissible cuts.
#pragma once

#include "pk_problem_module.h"

#include <cub/block/block_radix_sort.cuh>
#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define TOK_THREADS 256
#define MAX_VOCAB 2048
#define MAX_VARIANTS 8
#define DESC_STRIDE (5 + 3 * MAX_VARIANTS) // checker: per token n, max, target, go, x_t, variants
#define CUT_MARGIN 0.00390625f             // 2^-8: 8 bf16 ulps of the cumulative sum at 0.1
#define TARGET_BOOST 4.0f                  // spec 2.3: PKB's +8 keeps only the target 91% of times

static int cuda_code(cudaError_t e) {
    return e == cudaSuccess ? 0 : 2000 + (int)e;
}
static int nccl_code(ncclResult_t r) {
    return r == ncclSuccess ? 0 : 1000 + (int)r;
}

// PKB's _apply_top_k_top_p with top_k > 0 and/or top_p < 1.
struct FilterParams {
    int top_k;   // min(top_k, V); 0: no top-k mask
    int need_p;  // top_p < 1
    float thr_p; // `probs_sum > 1 - top_p` compares bf16 with the scalar cast to bf16 first
};

static FilterParams filter_params(double top_k, double top_p, int vocab) {
    FilterParams f;
    int k = (int)top_k;
    f.top_k = k > 0 ? (k < vocab ? k : vocab) : 0;
    f.need_p = top_p < 1.0;
    f.thr_p = __bfloat162float(__float2bfloat16_rn((float)(1.0 - top_p)));
    return f;
}

__host__ __device__ inline float bf16_round(float x) {
    return __bfloat162float(__float2bfloat16_rn(x));
}

// torch.cumsum on a (num_rows, row_size) bf16 tensor runs ATen's tensor_kernel_scan_innermost_dim
// with 2^log threads along the row (get_log_num_threads_x_inner_scan; its arithmetic is on
// uint32_t, wrap-around included).
__host__ __device__ inline uint32_t scan_log_threads_x(uint32_t num_rows, uint32_t row_size) {
    uint32_t lx = 0, ly = 0;
    while ((1u << lx) < row_size)
        ++lx;
    while ((1u << ly) < num_rows)
        ++ly;
    uint32_t diff = lx - ly;
    lx = (9u + diff) / 2u;
    return lx < 4u ? 4u : lx > 9u ? 9u : lx;
}

// The filter on one row sorted ascending (asc[0..V), stable): positions >= first survive top-k;
// their bf16 softmax, its cumulative sum exactly as PyTorch's bf16 scan rounds it (tiles of
// 2*2^log_ntx elements, the running total added to each tile's first element, then a Sklansky
// network; every add rounded to bf16), and the top-p cut. cs[p] is written for p >= first (the
// positions before hold zeros). Returns c: positions >= c are kept.
__host__ __device__ inline int topkp_cut(const float *asc, int V, int first, uint32_t log_ntx,
                                         const FilterParams &f, float *cs) {
    if (!f.need_p)
        return first;
    const float mx = asc[V - 1];
    float sum = 0.f;
    for (int p = first; p < V; p++)
        sum += expf(asc[p] - mx);
    for (int p = first; p < V; p++)
        cs[p] = bf16_round(expf(asc[p] - mx) / sum);
    const int tile = 2 << log_ntx;
    float carry = 0.f;
    for (int t0 = (first / tile) * tile; t0 < V; t0 += tile) {
        const int lo = first > t0 ? first : t0, hi = t0 + tile < V ? t0 + tile : V;
        if (lo == t0)
            cs[t0] = bf16_round(cs[t0] + carry);
        for (uint32_t m = 0; m <= log_ntx; m++) {
            const int s = 1 << m;
            for (int p = lo; p < hi; p++) {
                const int u = p - t0;
                const int si = t0 + (u & ~(2 * s - 1)) + s - 1;
                if ((u & s) && si >= lo) // below lo everything is 0: adding it changes nothing
                    cs[p] = bf16_round(cs[p] + cs[si]);
            }
        }
        if (hi == t0 + tile)
            carry = cs[hi - 1];
    }
    for (int p = first; p < V; p++)
        if (cs[p] > f.thr_p)
            return p;
    return V - 1;
}

// The first position that survives top-k (ties at the k-th largest value are kept).
__host__ __device__ inline int topk_first(const float *asc, int V, const FilterParams &f) {
    if (f.top_k <= 0)
        return 0;
    int first = V - f.top_k;
    const float th = asc[first];
    while (first > 0 && asc[first - 1] >= th)
        first--;
    return first;
}

// The checker's view of one token: every cut a correct kernel may reach. Cuts whose decisions
// sit within CUT_MARGIN of the threshold (another summation order, fp32 probabilities or
// PyTorch's own reduction order can flip them), the reference's own cut c first. Ties
// straddling a cut make which copies of the cut value are kept a matter of sort order (flag 1).
// d: n, max, target, grad_output, x_target, then (cut value, straddle flag, sum exp) per cut.
__host__ __device__ inline void admissible_cuts(const float *asc, int V, int first, int c,
                                                const float *cs, const FilterParams &f, int tgt,
                                                float go, float xt, float *d) {
    const float mx = asc[V - 1];
    int n = 0;
    int cand[MAX_VARIANTS];
    cand[n++] = c;
    if (f.need_p)
        for (int p = first; p < V && n < MAX_VARIANTS; p++) {
            const bool before_ok = p == first || cs[p - 1] <= f.thr_p + CUT_MARGIN;
            const bool at_ok = p == V - 1 || cs[p] > f.thr_p - CUT_MARGIN;
            if (p != c && before_ok && at_ok)
                cand[n++] = p;
        }
    d[0] = (float)n;
    d[1] = mx;
    d[2] = (float)tgt;
    d[3] = go;
    d[4] = xt;
    for (int i = 0; i < n; i++) {
        const int p = cand[i];
        float s = 0.f;
        for (int q = p; q < V; q++)
            s += expf(asc[q] - mx);
        d[5 + 3 * i] = asc[p];
        d[6 + 3 * i] = p > 0 && asc[p - 1] == asc[p] ? 1.f : 0.f;
        d[7 + 3 * i] = s;
    }
}

// 82/83: does out value g match one admissible cut of descriptor d? For a cut with value `val`
// the target is kept if x_t > val (or x_t == val without a tie straddling the cut), masked if
// x_t < val, either if x_t == val and tied elements straddle the cut.
__host__ __device__ inline bool logprob_ok(const float *d, float g) {
    const int n = (int)d[0];
    const float mx = d[1], xt = d[4];
    for (int i = 0; i < n; i++) {
        const float val = d[5 + 3 * i], tie = d[6 + 3 * i], s = d[7 + 3 * i];
        const float lp = (xt - mx) - logf(s);
        const bool may_keep = xt >= val, may_mask = xt < val || (xt == val && tie != 0.f);
        if (may_keep && fabsf(g - lp) <= 1e-5f + 1e-5f * fabsf(lp))
            return true;
        if (may_mask && g == -INFINITY)
            return true;
    }
    return false;
}

// 84: is gradient element g (logit x, vocabulary index v) right for the cut (val, tie, s)? Kept:
// go * (1[v = target] - p_v), p the softmax over the kept set; masked: 0; tied at a straddled
// cut: either.
__host__ __device__ inline bool grad_ok(float g, float x, int v, int tgt, float go, float mx,
                                        float val, float tie, float s) {
    const float p = expf(x - mx) / s;
    const float e = (v == tgt ? 1.f - p : -p) * go;
    const bool ok_kept = fabsf(g - e) <= 1e-6f + 1e-4f * fabsf(e), ok_zero = g == 0.f;
    if (x > val)
        return ok_kept;
    if (x == val)
        return tie != 0.f ? ok_kept || ok_zero : ok_kept;
    return ok_zero;
}

// Order-preserving 16-bit keys of bf16 bits (ascending like the values, -0 before +0 as radix
// sorts order them); key 0 is below every value and pads the block.
__device__ __forceinline__ uint16_t sort_key(uint16_t b) {
    return (b & 0x8000u) ? (uint16_t)~b : (uint16_t)(b | 0x8000u);
}
__device__ __forceinline__ float key_value(uint16_t k) {
    uint16_t b = (k & 0x8000u) ? (uint16_t)(k & 0x7fffu) : (uint16_t)~k;
    return __bfloat162float(__ushort_as_bfloat16(b));
}

enum { MODE_LOGPROB = 0, MODE_GRAD = 1, MODE_CHECK = 2 };

// One CTA per token of a vp->seq exchanged block: rows[(q*lt + j)*vl + i] is vocabulary entry
// q*vl + i of local token j (global token token0 + j). A stable block radix sort of the row
// (what torch.sort does for rows of <= 4096), the filter above, then per mode:
//   MODE_LOGPROB: out[j] = log_softmax(filtered)[target] (fp32), -inf if the target is masked;
//   MODE_GRAD:    the gradient row -p (+1 at the target), times grad_output, times the keep
//                 mask, into out laid out (q, j, i) for the seq->vp exchange;
//   MODE_CHECK:   out[j*DESC_STRIDE..]: every admissible kept set (below).
template <int ITEMS, int MODE>
__global__ void __launch_bounds__(TOK_THREADS)
    token_kernel(const __nv_bfloat16 *rows, int lt, int vl, int world, long long token0,
                 const int64_t *target, const __nv_bfloat16 *grad_output, FilterParams f,
                 uint32_t log_ntx, long long chunk_tokens, long long tokens, float *out) {
    typedef cub::BlockRadixSort<uint16_t, TOK_THREADS, ITEMS, uint16_t> Sort;
    __shared__ typename Sort::TempStorage sort_tmp;
    __shared__ __nv_bfloat16 row[MAX_VOCAB];
    __shared__ float asc[MAX_VOCAB], cs[MAX_VOCAB];
    __shared__ uint16_t pos_of[MAX_VOCAB];
    __shared__ int sh_cut;
    __shared__ float sh_max, sh_sum;
    const int j = blockIdx.x, V = vl * world;
    const long long t = token0 + j;
    uint16_t keys[ITEMS], vals[ITEMS];
#pragma unroll
    for (int k = 0; k < ITEMS; k++) {
        const int v = threadIdx.x * ITEMS + k;
        vals[k] = (uint16_t)v;
        keys[k] = 0;
        if (v < V) {
            const __nv_bfloat16 x = rows[((size_t)(v / vl) * lt + j) * vl + v % vl];
            row[v] = x;
            keys[k] = sort_key(__bfloat16_as_ushort(x));
        }
    }
    Sort(sort_tmp).Sort(keys, vals);
    const int pad = TOK_THREADS * ITEMS - V;
#pragma unroll
    for (int k = 0; k < ITEMS; k++) {
        const int p = threadIdx.x * ITEMS + k - pad;
        if (p >= 0) {
            asc[p] = key_value(keys[k]);
            pos_of[vals[k]] = (uint16_t)p;
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        uint32_t lnx = log_ntx;
        if (MODE == MODE_CHECK) { // the scan's shape of this token's chunk
            const long long start = t / chunk_tokens * chunk_tokens;
            const long long cur = tokens - start < chunk_tokens ? tokens - start : chunk_tokens;
            lnx = scan_log_threads_x((uint32_t)(cur / world), (uint32_t)V);
        }
        const int first = topk_first(asc, V, f);
        const int c = topkp_cut(asc, V, first, lnx, f, cs);
        const float mx = asc[V - 1];
        float sum = 0.f;
        for (int p = c; p < V; p++)
            sum += expf(asc[p] - mx);
        const int tgt = (int)target[t];
        if (MODE == MODE_LOGPROB) {
            out[j] = pos_of[tgt] >= c ? (__bfloat162float(row[tgt]) - mx) - logf(sum) : -INFINITY;
        } else if (MODE == MODE_GRAD) {
            sh_cut = c;
            sh_max = mx;
            sh_sum = sum;
        } else {
            admissible_cuts(asc, V, first, c, cs, f, tgt,
                            grad_output ? __bfloat162float(grad_output[t]) : 0.f,
                            __bfloat162float(row[tgt]), out + (size_t)j * DESC_STRIDE);
        }
    }
    if (MODE == MODE_GRAD) {
        __syncthreads();
        const int c = sh_cut, tgt = (int)target[t];
        const float mx = sh_max, sum = sh_sum, go = __bfloat162float(grad_output[t]);
        for (int v = threadIdx.x; v < V; v += TOK_THREADS) {
            const bool kept = pos_of[v] >= c;
            const float p = kept ? expf(__bfloat162float(row[v]) - mx) / sum : 0.f;
            float g = -p;
            if (v == tgt)
                g = g + 1.f;
            g = g * go;
            g = g * (kept ? 1.f : 0.f);
            out[((size_t)(v / vl) * lt + j) * vl + v % vl] = g;
        }
    }
}

template <int MODE>
static int launch_tokens(cudaStream_t st, const __nv_bfloat16 *rows, int lt, int vl, int world,
                         long long token0, const int64_t *target, const __nv_bfloat16 *go,
                         const FilterParams &f, long long chunk_tokens, long long tokens,
                         float *out) {
    const int V = vl * world;
    const uint32_t lnx = scan_log_threads_x((uint32_t)lt, (uint32_t)V);
    if (V <= 256)
        token_kernel<1, MODE><<<lt, TOK_THREADS, 0, st>>>(rows, lt, vl, world, token0, target, go,
                                                          f, lnx, chunk_tokens, tokens, out);
    else if (V <= 512)
        token_kernel<2, MODE><<<lt, TOK_THREADS, 0, st>>>(rows, lt, vl, world, token0, target, go,
                                                          f, lnx, chunk_tokens, tokens, out);
    else if (V <= 1024)
        token_kernel<4, MODE><<<lt, TOK_THREADS, 0, st>>>(rows, lt, vl, world, token0, target, go,
                                                          f, lnx, chunk_tokens, tokens, out);
    else if (V <= MAX_VOCAB)
        token_kernel<8, MODE><<<lt, TOK_THREADS, 0, st>>>(rows, lt, vl, world, token0, target, go,
                                                          f, lnx, chunk_tokens, tokens, out);
    else
        return 3000;
    return cuda_code(cudaGetLastError());
}

// Scratch that host-driven NCCL sends from or receives into is a registered window (ncclSend/
// ncclRecv between the windowed arena and plain cudaMalloc memory hangs in NCCL 2.28.3:
// docs/problems.md, known issues). init() sees no dims, so windows are sized on the first call,
// which every rank makes (trial 0, untimed); registration is collective.
struct RefWindow {
    void *ptr;
    size_t bytes;
    ncclWindow_t win;
};
static RefWindow g_ref, g_chk;

static int window_reserve(const pk_ctx *ctx, RefWindow *w, size_t bytes) {
    if (w->bytes >= bytes)
        return 0;
    int rc = cuda_code(cudaStreamSynchronize(ctx->stream));
    if (!rc && w->ptr) {
        rc = nccl_code(ncclCommWindowDeregister(ctx->comm, w->win));
        ncclMemFree(w->ptr);
        *w = RefWindow{};
    }
    if (!rc)
        rc = nccl_code(ncclMemAlloc(&w->ptr, bytes));
    if (!rc)
        rc = nccl_code(
            ncclCommWindowRegister(ctx->comm, w->ptr, bytes, &w->win, NCCL_WIN_COLL_SYMMETRIC));
    if (!rc)
        w->bytes = bytes;
    return rc;
}

static void fini(const pk_ctx *ctx) {
    RefWindow *ws[2] = {&g_ref, &g_chk};
    for (RefWindow *w : ws)
        if (w->ptr) {
            ncclCommWindowDeregister(ctx->comm, w->win);
            ncclMemFree(w->ptr);
            *w = RefWindow{};
        }
}

// all_to_all_single with equal splits: block p (`count` elements) of send goes to rank p, block
// p of recv comes from rank p; our own block is a copy. Grouped ncclSend/ncclRecv (NCCL 2.28.3
// on the GPU machines has no ncclAlltoAll).
static int all_to_all(const pk_ctx *ctx, const void *send, void *recv, size_t count, size_t elem,
                      ncclDataType_t type) {
    const int me = ctx->rank;
    const char *s = static_cast<const char *>(send);
    char *r = static_cast<char *>(recv);
    int rc = cuda_code(cudaMemcpyAsync(r + me * count * elem, s + me * count * elem, count * elem,
                                       cudaMemcpyDeviceToDevice, ctx->stream));
    if (rc)
        return rc;
    rc = nccl_code(ncclGroupStart());
    for (int p = 0; p < ctx->world_size && !rc; p++) {
        if (p == me)
            continue;
        rc = nccl_code(ncclSend(s + p * count * elem, count, type, p, ctx->comm, ctx->stream));
        if (!rc)
            rc = nccl_code(ncclRecv(r + p * count * elem, count, type, p, ctx->comm, ctx->stream));
    }
    const int end = nccl_code(ncclGroupEnd());
    return rc ? rc : end;
}

// The input generator's twist (after the generic draws): logits[t, target[t]] += 4 on the
// target's owner, in bf16 as PKB adds its mask (PKB adds 8; see meta.json).
__global__ void boost_targets(__nv_bfloat16 *logits, const int64_t *target, long long tokens,
                              int vl, int rank) {
    for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < tokens;
         t += (long long)gridDim.x * blockDim.x) {
        const long long local = target[t] - (long long)rank * vl;
        if (local >= 0 && local < vl) {
            __nv_bfloat16 *x = logits + t * vl + local;
            *x = __float2bfloat16_rn(__bfloat162float(*x) + TARGET_BOOST);
        }
    }
}

static int generate(const pk_problem_call *call, uint64_t seed, int trial) {
    const pk_ctx *ctx = call->ctx;
    const long long tokens = call->dims[0] * call->dims[1];
    const int vl = (int)(call->dims[2] / ctx->world_size);
    boost_targets<<<(unsigned)((tokens + 255) / 256), 256, 0, ctx->stream>>>(
        static_cast<__nv_bfloat16 *>(call->args[0]), static_cast<const int64_t *>(call->args[1]),
        tokens, vl, ctx->rank);
    return cuda_code(cudaGetLastError());
}

// The checker's verdict, accumulated on the device.
struct CheckAcc {
    unsigned long long bad;    // first failing element (atomicMin), ~0 if none
    unsigned max_abs, max_rel; // float bits (non-negative floats order like their bits)
};

__device__ void note_error(CheckAcc *acc, float got, float want) {
    if (isinf(got) || isinf(want) || isnan(got) || isnan(want))
        return;
    const float e = fabsf(got - want), r = want != 0.f ? e / fabsf(want) : e;
    atomicMax(&acc->max_abs, __float_as_uint(e));
    atomicMax(&acc->max_rel, __float_as_uint(r));
}

// The checker's first steps, collective (every rank calls check() for the same call): the
// logits go to the plain vp->seq layout (rank r: tokens [r*T/W, (r+1)*T/W)), each rank writes
// the admissible kept sets of its tokens, and an all-gather gives every rank all of them.
static int check_descriptors(const pk_problem_call *got, long long chunk_tokens, const float **all,
                             CheckAcc **acc) {
    const pk_ctx *ctx = got->ctx;
    const int world = ctx->world_size;
    const long long tokens = got->dims[0] * got->dims[1];
    const int vl = (int)(got->dims[2] / world);
    const long long lt = tokens / world;
    const size_t rows_bytes = (size_t)tokens * vl * sizeof(__nv_bfloat16);
    const size_t mine_bytes = (size_t)lt * DESC_STRIDE * sizeof(float);
    const size_t all_bytes = (size_t)tokens * DESC_STRIDE * sizeof(float);
    int rc = window_reserve(ctx, &g_chk, rows_bytes + mine_bytes + all_bytes + 256);
    if (rc)
        return rc;
    char *base = static_cast<char *>(g_chk.ptr);
    __nv_bfloat16 *rows = reinterpret_cast<__nv_bfloat16 *>(base);
    float *mine = reinterpret_cast<float *>(base + rows_bytes);
    float *every = reinterpret_cast<float *>(base + rows_bytes + mine_bytes);
    *acc = reinterpret_cast<CheckAcc *>(base + rows_bytes + mine_bytes + all_bytes);
    *all = every;
    const FilterParams f = filter_params(got->params[0], got->params[1], vl * world);
    const __nv_bfloat16 *go =
        got->n_args == 4 ? static_cast<const __nv_bfloat16 *>(got->args[2]) : NULL;
    rc = all_to_all(ctx, got->args[0], rows, (size_t)lt * vl, sizeof(__nv_bfloat16), ncclBfloat16);
    if (!rc)
        rc = launch_tokens<MODE_CHECK>(ctx->stream, rows, (int)lt, vl, world, ctx->rank * lt,
                                       static_cast<const int64_t *>(got->args[1]), go, f,
                                       chunk_tokens, tokens, mine);
    if (!rc)
        rc = nccl_code(ncclAllGather(mine, every, (size_t)lt * DESC_STRIDE, ncclFloat32, ctx->comm,
                                     ctx->stream));
    if (!rc)
        rc = cuda_code(cudaMemsetAsync(*acc, 0, sizeof(CheckAcc), ctx->stream));
    if (!rc)
        rc =
            cuda_code(cudaMemsetAsync(&(*acc)->bad, 0xff, sizeof(unsigned long long), ctx->stream));
    return rc;
}

static int check_report(const pk_problem_call *want, const pk_problem_call *got, int arg,
                        CheckAcc *acc, pk_check_report *out) {
    CheckAcc h;
    int rc =
        cuda_code(cudaMemcpyAsync(&h, acc, sizeof h, cudaMemcpyDeviceToHost, got->ctx->stream));
    if (!rc)
        rc = cuda_code(cudaStreamSynchronize(got->ctx->stream));
    if (rc)
        return rc;
    out->passed = h.bad == ~0ull;
    out->bad_index = out->passed ? -1 : (long long)h.bad;
    out->expected = out->got = 0;
    if (!out->passed) {
        float e = 0, g = 0;
        const float *w = static_cast<const float *>(want->args[arg]) + h.bad;
        const float *c = static_cast<const float *>(got->args[arg]) + h.bad;
        cudaMemcpy(&e, w, sizeof e, cudaMemcpyDeviceToHost);
        cudaMemcpy(&g, c, sizeof g, cudaMemcpyDeviceToHost);
        out->expected = e;
        out->got = g;
    }
    float a, r;
    memcpy(&a, &h.max_abs, sizeof a);
    memcpy(&r, &h.max_rel, sizeof r);
    out->max_abs = a;
    out->max_rel = r;
    return 0;
}
