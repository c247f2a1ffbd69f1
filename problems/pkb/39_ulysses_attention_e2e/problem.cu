// pkb/39_ulysses_attention_e2e: ParallelKernelBench problem 39
// (reference/39_ulysses_attention_e2e.py), an attention layer with Ulysses sequence parallelism.
// Rank r holds the hidden states of positions [r S, (r+1) S) of a sequence of T = W S (B, S,
// NH*HD) and its own weights (PKB seeds every input by rank): w_qkv (3 NH HD, NH HD), w_o (NH HD,
// NH HD). PKB's solution():
//   qkv = hidden w_qkv^T (bf16), viewed as (B, S, 3, NH, HD): q, k, v;
//   q, (k, v) = gather_seq_scatter_heads: an all-to-all, rank r gets heads [r HL, (r+1) HL) of
//     every position (HL = NH / W): (B, T, HL, HD);
//   attn = _local_attention(q, k, v): softmax(scale q k^T) v with q (B, T, HL, HD), i.e. per
//     position, the HL local heads attend to each other (PKB's matmul runs over the last two
//     dims, heads x head_dim: there is no transpose(1, 2));
//   attn = gather_heads_scatter_seq: the all-to-all back, (B, S, NH, HD);
//   out = attn w_o^T (bf16).
#include "pk_problem_module.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>

#include "pk_attention.cuh"
#include "pk_splitmix.h"
#include "pk_ulysses.cuh"

typedef __nv_bfloat16 bf16;
typedef int (*entry_fn)(const pk_ctx *, const bf16 *, const bf16 *, const bf16 *, bf16 *, size_t,
                        size_t, size_t, size_t, float);

#define BLAS_WS_BYTES ((size_t)32 << 20)
#define THREADS 256

static struct {
    cublasHandle_t blas;
    cudaStream_t blas_stream;
    void *blas_ws;
    PkUlyWork work; // registered send | recv of both all-to-alls
    bf16 *qkv, *y, *attn,
        *gathered; // (B S, 3 NH HD), (B, T, 3, HL, HD), (B, T, HL, HD), (B S, NH HD)
    size_t n;      // B S NH HD of the allocation
} g;

static int cuda_code(cudaError_t e) {
    return e == cudaSuccess ? 0 : 2000 + (int)e;
}

static int blas_code(cublasStatus_t s) {
    return s == CUBLAS_STATUS_SUCCESS ? 0 : 3000 + (int)s;
}

static int init(const pk_ctx *ctx) {
    (void)ctx;
    int rc = blas_code(cublasCreate(&g.blas));
    if (!rc)
        rc = cuda_code(cudaMalloc(&g.blas_ws, BLAS_WS_BYTES));
    return rc;
}

static void buffers_free(void) {
    cudaFree(g.qkv);
    cudaFree(g.y);
    cudaFree(g.attn);
    cudaFree(g.gathered);
    g.qkv = g.y = g.attn = g.gathered = NULL;
    g.n = 0;
}

static void fini(const pk_ctx *ctx) {
    buffers_free();
    pk_uly_work_free(ctx, &g.work);
    if (g.blas)
        cublasDestroy(g.blas);
    cudaFree(g.blas_ws);
    g.blas = NULL;
    g.blas_ws = NULL;
    g.blas_stream = NULL;
}

// cublasSetStream resets the workspace to cuBLAS's own pool, so the workspace is set after it.
static int blas_on(cudaStream_t stream) {
    if (g.blas_stream == stream)
        return 0;
    int rc = blas_code(cublasSetStream(g.blas, stream));
    if (!rc)
        rc = blas_code(cublasSetWorkspace(g.blas, g.blas_ws, BLAS_WS_BYTES));
    g.blas_stream = rc ? NULL : stream;
    return rc;
}

// n = B S NH HD elements: q, k, v, attn each have n on every rank, before and after the exchange.
static int buffers_reserve(const pk_ctx *ctx, size_t n) {
    if (g.n >= n)
        return 0;
    if (cudaStreamSynchronize(ctx->stream) != cudaSuccess)
        return 2001;
    buffers_free();
    int rc = cuda_code(cudaMalloc(&g.qkv, 3 * n * sizeof(bf16)));
    if (!rc)
        rc = cuda_code(cudaMalloc(&g.y, 3 * n * sizeof(bf16)));
    if (!rc)
        rc = cuda_code(cudaMalloc(&g.attn, n * sizeof(bf16)));
    if (!rc)
        rc = cuda_code(cudaMalloc(&g.gathered, n * sizeof(bf16)));
    if (!rc)
        g.n = n;
    return rc;
}

// Row-major Y (rows x out_f) = X (rows x in_f) W^T, W (out_f x in_f): F.linear in bf16 with fp32
// accumulation on the tensor cores. Column-major cuBLAS sees Y^T = W X^T.
static int linear(const bf16 *X, const bf16 *W, bf16 *Y, int rows, int in_f, int out_f) {
    const float one = 1.f, zero = 0.f;
    return blas_code(cublasGemmEx(g.blas, CUBLAS_OP_T, CUBLAS_OP_N, out_f, rows, in_f, &one, W,
                                  CUDA_R_16BF, in_f, X, CUDA_R_16BF, in_f, &zero, Y, CUDA_R_16BF,
                                  out_f, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

// PKB's _local_attention on (B, T, HL, HD): one warp per (position, query head i) attends to the
// HL heads j of the same position, scores scale * q_i . k_j in fp32 (the lanes' partial dot
// products, then a warp sum), the online softmax of pk_attention.cuh over j, P in fp32, the
// output rounded to bf16. y is (B, T, 3, HL, HD): q, k, v blocks of HL heads per position.
// One warp per task and no grid-stride loop (every task's loads in flight at once), q in
// registers, and the j loop unrolled so that later heads' k and v loads overlap earlier heads'
// softmax: the same operations in the same order as a plain loop, so the same bits (a
// grid-stride version with a scalar j loop was latency-bound at 81% of the reference's time).
__global__ void __launch_bounds__(THREADS)
    head_attention(const bf16 *y, bf16 *attn, long long positions, int HL, int HD, float scale) {
    const long long w = ((long long)blockIdx.x * THREADS + threadIdx.x) / 32;
    if (w >= positions * HL) // the same w on every lane: whole warps leave
        return;
    const int lane = threadIdx.x % 32;
    const long long pos = w / HL;
    const int i = (int)(w % HL);
    const bf16 *row = y + pos * 3 * HL * HD;
    float qv[4] = {0.f, 0.f, 0.f, 0.f}; // dims lane, lane + 32, ... (HD <= 128)
    for (int d = lane, c = 0; d < HD; d += 32, c++)
        qv[c] = __bfloat162float(row[(size_t)i * HD + d]);
    PkSoftmaxRow sm = pk_softmax_row_init();
    float o[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll 4
    for (int j = 0; j < HL; j++) {
        const bf16 *k = row + (size_t)(HL + j) * HD, *v = row + (size_t)(2 * HL + j) * HD;
        float part = 0.f;
        for (int d = lane, c = 0; d < HD; d += 32, c++)
            part += qv[c] * __bfloat162float(k[d]);
        for (int off = 16; off; off >>= 1)
            part += __shfl_xor_sync(0xffffffffu, part, off);
        const float s = part * scale;
        const float alpha = pk_softmax_row_rescale(&sm, s);
        const float p = pk_softmax_row_p(&sm, s);
        sm.l += p;
        for (int d = lane, c = 0; d < HD; d += 32, c++)
            o[c] = o[c] * alpha + p * __bfloat162float(v[d]);
    }
    const float inv_l = 1.f / sm.l;
    bf16 *dst = attn + (pos * HL + i) * HD;
    for (int d = lane, c = 0; d < HD; d += 32, c++)
        dst[d] = __float2bfloat16(o[c] * inv_l);
}

// The same attention with one warp per position (HL <= 8, HD == 64, the problem's shapes: HL =
// NH / W with NH = 8): the position's q, k and v staged in shared memory once (rows padded by
// one word against bank conflicts), every lane computing whole scores (HL x HL <= 64, two per
// lane), then each lane two output dims of every query head with a two-pass fp32 softmax. The
// warp-per-(position, head) kernel above re-read k and v per query head and ran its head loop
// as one latency-bound chain (it stays for other shapes).
#define HA_MAX_HL 8
#define HA_HD 64
#define HA_ROW (HA_HD + 2) // bf16 per staged row: 33 words, so rows fall on different banks
__global__ void __launch_bounds__(THREADS)
    head_attention_pos(const bf16 *y, bf16 *attn, long long positions, int HL, float scale) {
    __shared__ bf16 stage[THREADS / 32][3 * HA_MAX_HL * HA_ROW];
    __shared__ float scores[THREADS / 32][HA_MAX_HL * HA_MAX_HL];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const long long pos = (long long)blockIdx.x * (THREADS / 32) + warp;
    if (pos >= positions) // whole warps leave
        return;
    bf16 *st = stage[warp];
    float *sc = scores[warp];
    const bf16 *row = y + pos * 3 * HL * HA_HD;
    // 3 HL rows of 64 bf16, as 32-bit words: 32 per row, one per lane.
    for (int r = 0; r < 3 * HL; r++)
        reinterpret_cast<uint32_t *>(st + r * HA_ROW)[lane] =
            reinterpret_cast<const uint32_t *>(row + (size_t)r * HA_HD)[lane];
    __syncwarp();
    for (int pair = lane; pair < HL * HL; pair += 32) {
        const bf16 *q = st + (pair / HL) * HA_ROW, *k = st + (HL + pair % HL) * HA_ROW;
        float dot = 0.f;
        for (int d = 0; d < HA_HD; d++)
            dot += __bfloat162float(q[d]) * __bfloat162float(k[d]);
        sc[pair] = dot * scale;
    }
    __syncwarp();
    const int d = 2 * lane;
    for (int i = 0; i < HL; i++) {
        float m = -INFINITY;
        for (int j = 0; j < HL; j++)
            m = fmaxf(m, sc[i * HL + j]);
        float l = 0.f, o0 = 0.f, o1 = 0.f;
        for (int j = 0; j < HL; j++) {
            const float p = expf(sc[i * HL + j] - m);
            const bf16 *v = st + (2 * HL + j) * HA_ROW;
            l += p;
            o0 += p * __bfloat162float(v[d]);
            o1 += p * __bfloat162float(v[d + 1]);
        }
        const float inv_l = 1.f / l;
        reinterpret_cast<__nv_bfloat162 *>(attn + (pos * HL + i) * HA_HD)[lane] =
            __floats2bfloat162_rn(o0 * inv_l, o1 * inv_l);
    }
}

// gather_heads_scatter_seq, PKB's _all_to_all(scatter_dim=1, gather_dim=2): tensor_split(attn,
// W, dim=seq)[p].contiguous() for every remote p: send (W, B, S, HL HD), in 16-byte vectors.
__global__ void __launch_bounds__(THREADS) pack_seq(const uint4 *attn, uint4 *send, int rank,
                                                    int world, size_t B, size_t S, size_t cw_vecs) {
    const size_t per = B * S * cw_vecs, n = per * (size_t)world,
                 stride = (size_t)gridDim.x * THREADS;
    for (size_t o = (size_t)blockIdx.x * THREADS + threadIdx.x; o < n; o += stride) {
        const size_t p = o / per, e = o % per, c = e % cw_vecs, s = (e / cw_vecs) % S,
                     b = e / cw_vecs / S;
        if ((int)p != rank)
            send[o] = attn[((b * (size_t)world + p) * S + s) * cw_vecs + c];
    }
}

// torch.cat(received, dim=heads): gathered (B, S, W HL HD), block q from rank q (ours from attn).
__global__ void __launch_bounds__(THREADS)
    unpack_heads(const uint4 *attn, const uint4 *recv, uint4 *gathered, int rank, int world,
                 size_t B, size_t S, size_t cw_vecs) {
    const size_t row_vecs = (size_t)world * cw_vecs, n = B * S * row_vecs, per = B * S * cw_vecs,
                 stride = (size_t)gridDim.x * THREADS;
    for (size_t o = (size_t)blockIdx.x * THREADS + threadIdx.x; o < n; o += stride) {
        const size_t v = o % row_vecs, row = o / row_vecs, q = v / cw_vecs, c = v % cw_vecs;
        const size_t b = row / S, s = row % S;
        gathered[o] = (int)q == rank ? attn[((b * (size_t)world + rank) * S + s) * cw_vecs + c]
                                     : recv[q * per + row * cw_vecs + c];
    }
}

// Baseline, PKB's steps one after another: the QKV projection (cuBLAS), the all-to-all that
// gathers the sequence and scatters the heads of q, k and v at once (pk_ulysses.cuh's pack, grouped
// NCCL send/recv and concatenation: PKB makes two all-to-alls, q and the stacked (k, v), of the
// same heads), the head attention, the all-to-all back (pack by sequence chunk, send/recv,
// concatenation of the heads) and the output projection (cuBLAS).
static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const int world = ctx->world_size, rank = ctx->rank;
    const size_t B = (size_t)call->dims[0], T = (size_t)call->dims[1];
    const int NH = (int)call->dims[2], HD = (int)call->dims[3];
    const size_t S = (size_t)call->dims[4], HL = (size_t)NH / world, hid = (size_t)NH * HD;
    const size_t n = B * S * hid, chunk = B * S * 3 * HL * HD; // elements per rank and peer
    if (NH % world || HD % 8 || HD > 128 || T != S * world)
        return 3001;
    int rc = buffers_reserve(ctx, n);
    if (!rc)
        rc = pk_uly_work_reserve(ctx, &g.work, 2 * (size_t)world * chunk * sizeof(bf16));
    if (!rc)
        rc = blas_on(ctx->stream);
    if (rc)
        return rc;
    const bf16 *hidden = static_cast<const bf16 *>(call->args[0]);
    const bf16 *w_qkv = static_cast<const bf16 *>(call->args[1]);
    const bf16 *w_o = static_cast<const bf16 *>(call->args[2]);
    bf16 *out = static_cast<bf16 *>(call->args[3]);
    bf16 *send = static_cast<bf16 *>(g.work.ptr), *recv = send + (size_t)world * chunk;
    const int rows = (int)(B * S), grid = 4 * 132;
    rc = linear(hidden, w_qkv, g.qkv, rows, (int)hid, (int)(3 * hid));
    if (rc)
        return rc;
    pk_uly_pack_features<<<grid, PK_ULY_THREADS, 0, ctx->stream>>>(
        reinterpret_cast<const uint4 *>(g.qkv), reinterpret_cast<uint4 *>(send), rank, world, B * S,
        3, hid / 8, HL * HD / 8);
    rc = cuda_code(cudaGetLastError());
    if (!rc)
        rc = pk_uly_exchange(ctx, send, recv, chunk);
    if (rc)
        return rc;
    pk_uly_unpack_seq<<<grid, PK_ULY_THREADS, 0, ctx->stream>>>(
        reinterpret_cast<const uint4 *>(g.qkv), reinterpret_cast<const uint4 *>(recv),
        reinterpret_cast<uint4 *>(g.y), rank, B, S, T, 3, hid / 8, HL * HD / 8);
    const long long positions = (long long)(B * T);
    if (HL <= HA_MAX_HL && HD == HA_HD) {
        const long long per_block = THREADS / 32; // one warp per position
        head_attention_pos<<<(unsigned)((positions + per_block - 1) / per_block), THREADS, 0,
                             ctx->stream>>>(g.y, g.attn, positions, (int)HL,
                                            (float)call->params[0]);
    } else {
        const long long tasks = positions * (long long)HL; // one warp each
        head_attention<<<(unsigned)((tasks * 32 + THREADS - 1) / THREADS), THREADS, 0,
                         ctx->stream>>>(g.y, g.attn, positions, (int)HL, HD,
                                        (float)call->params[0]);
    }
    const size_t chunk2 = B * S * HL * HD, cw_vecs = HL * HD / 8;
    pack_seq<<<grid, THREADS, 0, ctx->stream>>>(reinterpret_cast<const uint4 *>(g.attn),
                                                reinterpret_cast<uint4 *>(send), rank, world, B, S,
                                                cw_vecs);
    rc = cuda_code(cudaGetLastError());
    if (!rc)
        rc = pk_uly_exchange(ctx, send, recv, chunk2);
    if (rc)
        return rc;
    unpack_heads<<<grid, THREADS, 0, ctx->stream>>>(
        reinterpret_cast<const uint4 *>(g.attn), reinterpret_cast<const uint4 *>(recv),
        reinterpret_cast<uint4 *>(g.gathered), rank, world, B, S, cw_vecs);
    rc = cuda_code(cudaGetLastError());
    if (!rc)
        rc = linear(g.gathered, w_o, out, rows, (int)hid, (int)hid);
    return rc;
}

// PKB's inputs are N(0, 1) on every rank (each its own weights: PKB seeds every input by rank).
// N(0, 1) weights make the scores ~ 500 apart, a hard argmax that PKB's bf16 scores cannot
// resolve against fp64; here w_qkv ~ N(0, 1/(NH HD)) and w_o ~ N(0, 1/(NH HD)) (a unit-variance
// projection, the scores ~ N(0, 1) as PKB's other attention problems), hidden ~ N(0, 1) times a
// scale per rank and call (1 at even keys, 2^-1..2^1 at odd ones), and at keys 2 mod 3 one hot
// position per batch and rank whose hidden vector is 8 N(0, 1) (its scores std 64: up to
// hundreds, so a softmax without its running max overflows), drawn with a designed margin: the
// first of HOT_CANDIDATES draws whose every (query head, group) row has its top score at least
// max(8, 4 bf16 steps) above the runner-up (so bf16-rounded scores, PKB's, cannot move the
// softmax: exp(-8)) and whose largest top score is >= 96 (exp overflows fp32); see meta.json.
#define HOT_FACTOR 8.f
#define HOT_CANDIDATES 256
#define HOT_GAP_MIN 8.f
#define HOT_PEAK_MIN 96.f

static __device__ float normal_at(uint64_t key, size_t i) {
    const double u1 = pk_splitmix_unit(key + 2 * i), u2 = pk_splitmix_unit(key + 2 * i + 1);
    return (float)(sqrt(-2.0 * log(u1 > 0 ? u1 : 1e-300)) * cos(6.283185307179586 * u2));
}

__global__ void fill_normal(bf16 *x, size_t count, uint64_t key, float scale) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x)
        x[i] = __float2bfloat16(scale * normal_at(key, i));
}

// 4 bf16 steps at |x| (8 significand bits: the step is 2^(floor(log2 |x|) - 7)).
static __device__ float bf16_steps4(float x) {
    int e;
    frexpf(fabsf(x), &e); // |x| = f 2^e, f in [0.5, 1)
    return x == 0.f ? 0.f : ldexpf(4.f, e - 8);
}

// One block (THREADS) per batch b: the hot position s = splitmix(hot + b) % S gets candidate c's
// vector HOT_FACTOR N(0, 1) (key splitmix(hot + ((b + 1) << 32) + c)), c the first candidate
// whose margin key >= 0, else the largest key. The key of a candidate: its q and k rows as the
// reference computes them (bf16(fp32 sums of bf16 products): lane l sums e = l, l + 32, ... in
// order, then a butterfly over the lanes, which bench/pkb/sim_39 repeats exactly), the scores
// scale q_i . k_j (fp32, d in order) of every query head i over its group of HL heads, and
// min(min_i(gap_i - max(HOT_GAP_MIN, 4 steps of max(|top_i|, |second_i|))), max_i top_i -
// HOT_PEAK_MIN) (a group of one head has no runner-up).
__global__ void __launch_bounds__(THREADS)
    hot_inject(bf16 *hidden, const bf16 *w_qkv, size_t S, int NH, int HD, int HL, float scale,
               uint64_t hot) {
    extern __shared__ float sh[]; // h (hid), q | k (2 hid), scores (NH HL), the key
    const int hid = NH * HD, b = blockIdx.x, lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    float *h = sh, *qk = sh + hid, *sc = qk + 2 * hid, *ctl = sc + NH * HL;
    float best_key = -INFINITY;
    int best_c = 0;
    for (int c = 0; c < HOT_CANDIDATES; c++) {
        const uint64_t ck = pk_splitmix64(hot + ((uint64_t)(b + 1) << 32) + (uint64_t)c);
        for (int e = threadIdx.x; e < hid; e += THREADS)
            h[e] = __bfloat162float(__float2bfloat16(HOT_FACTOR * normal_at(ck, (size_t)e)));
        __syncthreads();
        for (int o = warp; o < 2 * hid; o += THREADS / 32) {
            const bf16 *w = w_qkv + (size_t)o * hid;
            float part = 0.f;
            for (int e = lane; e < hid; e += 32)
                part += h[e] * __bfloat162float(w[e]);
            for (int off = 16; off; off >>= 1)
                part += __shfl_xor_sync(0xffffffffu, part, off);
            if (!lane)
                qk[o] = __bfloat162float(__float2bfloat16(part));
        }
        __syncthreads();
        for (int t = threadIdx.x; t < NH * HL; t += THREADS) {
            const int i = t / HL, j = i / HL * HL + t % HL;
            float d = 0.f;
            for (int x = 0; x < HD; x++)
                d += qk[i * HD + x] * qk[hid + j * HD + x];
            sc[t] = d * scale;
        }
        __syncthreads();
        if (!threadIdx.x) {
            float gap_key = INFINITY, peak = -INFINITY;
            for (int i = 0; i < NH; i++) {
                float top = -INFINITY, second = -INFINITY;
                for (int j = 0; j < HL; j++) {
                    const float v = sc[i * HL + j];
                    second = v > top ? top : fmaxf(second, v);
                    top = fmaxf(top, v);
                }
                peak = fmaxf(peak, top);
                if (HL > 1)
                    gap_key =
                        fminf(gap_key, top - second -
                                           fmaxf(HOT_GAP_MIN,
                                                 bf16_steps4(fmaxf(fabsf(top), fabsf(second)))));
            }
            ctl[0] = fminf(gap_key, peak - HOT_PEAK_MIN);
        }
        __syncthreads();
        const float key = ctl[0];
        __syncthreads();
        if (key > best_key) {
            best_key = key;
            best_c = c;
        }
        if (key >= 0.f)
            break;
    }
    const uint64_t ck = pk_splitmix64(hot + ((uint64_t)(b + 1) << 32) + (uint64_t)best_c);
    const size_t s = pk_splitmix64(hot + (uint64_t)b) % S;
    for (int e = threadIdx.x; e < hid; e += THREADS)
        hidden[((size_t)b * S + s) * hid + e] =
            __float2bfloat16(HOT_FACTOR * normal_at(ck, (size_t)e));
}

static int generate(const pk_problem_call *call, uint64_t seed, int trial) {
    const pk_ctx *ctx = call->ctx;
    const uint64_t rank = (uint64_t)ctx->rank;
    const size_t B = (size_t)call->dims[0], S = (size_t)call->dims[4];
    const int NH = (int)call->dims[2], HD = (int)call->dims[3];
    const size_t hid = (size_t)NH * HD;
    const uint64_t base = pk_splitmix64(seed ^ pk_splitmix64(0x39390000ULL + (uint64_t)trial));
    float hscale = 1.f;
    if (trial & 1 && trial % 3 != 2)
        hscale = (float)exp2(2.0 * pk_splitmix_unit(base + 7 + rank) - 1.0);
    const float wscale = (float)(1.0 / sqrt((double)hid));
    const uint64_t keys[3] = {pk_splitmix64(base + 100 + rank), pk_splitmix64(base + 200 + rank),
                              pk_splitmix64(base + 300 + rank)};
    const float scales[3] = {hscale, wscale, wscale};
    for (int a = 0; a < 3; a++) {
        fill_normal<<<264, 256, 0, ctx->stream>>>(static_cast<bf16 *>(call->args[a]),
                                                  call->counts[a], keys[a], scales[a]);
        if (cudaGetLastError() != cudaSuccess)
            return 2000;
    }
    if (trial % 3 == 2) {
        const int world = ctx->world_size;
        if (world < 1 || NH % world || !B || !S)
            return 3001;
        const size_t shmem = (3 * hid + (size_t)NH * (NH / world) + 1) * sizeof(float);
        hot_inject<<<(unsigned)B, THREADS, shmem, ctx->stream>>>(
            static_cast<bf16 *>(call->args[0]), static_cast<const bf16 *>(call->args[1]), S, NH, HD,
            NH / world, (float)call->params[0], pk_splitmix64(base + 400 + rank) | 1);
        if (cudaGetLastError() != cudaSuccess)
            return 2000;
    }
    return 0;
}

static int invoke(void *fn, const pk_problem_call *c) {
    if (!fn || c->n_args != 4 || c->n_dims < 5 || c->n_params < 1)
        return -1;
    return reinterpret_cast<entry_fn>(fn)(
        c->ctx, static_cast<const bf16 *>(c->args[0]), static_cast<const bf16 *>(c->args[1]),
        static_cast<const bf16 *>(c->args[2]), static_cast<bf16 *>(c->args[3]), (size_t)c->dims[0],
        (size_t)c->dims[4], (size_t)c->dims[2], (size_t)c->dims[3], (float)c->params[0]);
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, invoke, generate, init, fini, NULL};
    return &module;
}
