// pkb/55_ring_attention_tp: ParallelKernelBench problem 55 (reference/55_ring_attention_tp.py),
// causal ring attention inside a tensor-parallel attention layer. W ranks = TP 2 x CP W/2 in
// Megatron's 'tp-cp' order (rank = cp_rank * 2 + tp_rank): the TP groups are the pairs {2c, 2c+1},
// the CP groups the strided sets {t, t + 2, ...}. Rank (cp, tp) holds the hidden states of
// sequence shard cp (B, S, NH*HD; the same on both ranks of a TP pair) and the weights of its
// head half tp (w_qkv (3*HL*HD, NH*HD), w_o (NH*HD, HL*HD), HL = NH / 2; the same on every rank
// of a CP group). It computes
//   qkv = hidden w_qkv^T (bf16), q, k, v = its (B, S, 3, HL, HD) view,
//   ctx = causal ring attention over the CP group (PKB's _ring_attn_forward, bf16),
//   out = all_reduce_TP(ctx w_o^T) (bf16 sum over the pair),
// every step rounded to bf16 as PyTorch does (F.linear in bf16 with fp32 accumulation).
#include "pk_problem_module.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>

#include "pk_attention.cuh"
#include "pk_splitmix.h"

typedef __nv_bfloat16 bf16;
typedef int (*entry_fn)(const pk_ctx *, const bf16 *, const bf16 *, const bf16 *, bf16 *, size_t,
                        size_t, size_t, size_t, float);

#define BLAS_WS_BYTES ((size_t)32 << 20)
static struct {
    ncclComm_t tp, cp; // split once in init()
    cublasHandle_t blas;
    cudaStream_t blas_stream;
    void *blas_ws;
    bf16 *qkv, *kv, *ring, *ctx; // (B S, 3 HL HD), (2, B S HL HD), ring buffers, (B S, HL HD)
    float *acc;
    size_t n; // B S HL HD of the allocation
} g;

static int nccl_code(ncclResult_t r) {
    return r == ncclSuccess ? 0 : 1000 + (int)r;
}

static int cuda_code(cudaError_t e) {
    return e == cudaSuccess ? 0 : 2000 + (int)e;
}

static int blas_code(cublasStatus_t s) {
    return s == CUBLAS_STATUS_SUCCESS ? 0 : 3000 + (int)s;
}

static int init(const pk_ctx *ctx) {
    int rc = nccl_code(ncclCommSplit(ctx->comm, ctx->rank / 2, ctx->rank, &g.tp, NULL));
    if (!rc)
        rc = nccl_code(ncclCommSplit(ctx->comm, ctx->rank % 2, ctx->rank, &g.cp, NULL));
    if (!rc)
        rc = blas_code(cublasCreate(&g.blas));
    if (!rc)
        rc = cuda_code(cudaMalloc(&g.blas_ws, BLAS_WS_BYTES));
    return rc;
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

static void buffers_free(void) {
    cudaFree(g.qkv);
    cudaFree(g.kv);
    cudaFree(g.ring);
    cudaFree(g.ctx);
    cudaFree(g.acc);
    g.qkv = g.kv = g.ring = g.ctx = NULL;
    g.acc = NULL;
    g.n = 0;
}

static void fini(const pk_ctx *ctx) {
    (void)ctx;
    buffers_free();
    if (g.blas)
        cublasDestroy(g.blas);
    cudaFree(g.blas_ws);
    if (g.tp)
        ncclCommDestroy(g.tp);
    if (g.cp)
        ncclCommDestroy(g.cp);
    g.blas = NULL;
    g.blas_ws = NULL;
    g.blas_stream = NULL;
    g.tp = g.cp = NULL;
}

// n = B S HL HD elements of each of q, k, v, ctx on this rank; rows = B S.
static int buffers_reserve(const pk_ctx *ctx, size_t n, size_t rows) {
    if (g.n >= n)
        return 0;
    if (cudaStreamSynchronize(ctx->stream) != cudaSuccess)
        return 2001;
    buffers_free();
    int rc = cuda_code(cudaMalloc(&g.qkv, 3 * n * sizeof(bf16)));
    if (!rc)
        rc = cuda_code(cudaMalloc(&g.kv, 2 * n * sizeof(bf16)));
    if (!rc)
        rc = cuda_code(cudaMalloc(&g.ring, 4 * n * sizeof(bf16)));
    if (!rc)
        rc = cuda_code(cudaMalloc(&g.ctx, n * sizeof(bf16)));
    if (!rc)
        rc = cuda_code(cudaMalloc(&g.acc, (n + rows * (n / rows / PK_ATTN_D)) * sizeof(float)));
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

// Baseline, PKB's steps one after another: the QKV projection (cuBLAS), k and v copied out of
// the (B, S, 3, HL, HD) view into contiguous tensors (PKB's .contiguous()), the CP ring of
// pk_attention.cuh (pk_attn_ring_forward: the flash-style tile per step with P split into two
// bf16 terms, ~16 bits, as PKB's attention is fp32; host-driven NCCL
// send/recv on the CP communicator), the output projection (cuBLAS) and the bf16 all-reduce
// over the TP pair (NCCL).
static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const int B = (int)call->dims[0], NH = (int)call->dims[2], HD = (int)call->dims[3];
    const int S = (int)call->dims[5], HL = NH / 2, hid = NH * HD, rows = B * S;
    const size_t n = (size_t)rows * HL * HD;
    int rc = buffers_reserve(ctx, n, (size_t)rows);
    if (!rc)
        rc = blas_on(ctx->stream);
    if (rc)
        return rc;
    const bf16 *hidden = static_cast<const bf16 *>(call->args[0]);
    const bf16 *w_qkv = static_cast<const bf16 *>(call->args[1]);
    const bf16 *w_o = static_cast<const bf16 *>(call->args[2]);
    bf16 *out = static_cast<bf16 *>(call->args[3]);
    rc = linear(hidden, w_qkv, g.qkv, rows, hid, 3 * HL * HD);
    const size_t part = (size_t)HL * HD * sizeof(bf16), pitch = 3 * part;
    for (int j = 0; j < 2 && !rc; j++) // k (j = 0) and v (j = 1): columns [(1 + j) HL HD, ...)
        rc = cuda_code(cudaMemcpy2DAsync(
            g.kv + (size_t)j * n, part, reinterpret_cast<const char *>(g.qkv) + (1 + j) * part,
            pitch, part, (size_t)rows, cudaMemcpyDeviceToDevice, ctx->stream));
    if (rc)
        return rc;
    PkAttnRing r = {};
    r.q = g.qkv;
    r.ld_q = 3LL * HL * HD;
    r.k = g.kv;
    r.v = g.kv + n;
    r.out = g.ctx;
    r.B = B;
    r.S = S;
    r.H = HL;
    r.causal = 1; // PKB's inputs pass causal=True
    r.scale = (float)call->params[0];
    r.comm = g.cp;
    r.rank = ctx->rank / 2;
    r.world = ctx->world_size / 2;
    r.ring = g.ring;
    r.acc = g.acc;
    rc = pk_attn_ring_forward<PK_ATTN_P_SPLIT>(r, ctx->stream);
    if (!rc)
        rc = linear(g.ctx, w_o, out, rows, HL * HD, hid);
    if (!rc)
        rc = nccl_code(
            ncclAllReduce(out, out, (size_t)rows * hid, ncclBfloat16, ncclSum, g.tp, ctx->stream));
    return rc;
}

// PKB's inputs: the hidden states of CP rank c are the same on both ranks of its TP pair, the
// weights of TP rank t the same on every rank of its CP group (PKB seeds them by cp_rank and by
// tp_rank), which no generator scope expresses: drawn here from (seed, trial, group, argument).
// hidden ~ N(0, 1) times a scale per CP rank and call (1 at even keys, PKB's; 2^-1..2^1 at odd
// ones, so that no CP shard stands for another), w_qkv and w_o ~ N(0, 0.02^2) as PKB's.
__global__ void fill_normal(bf16 *x, size_t count, uint64_t key, float scale) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < count;
         i += (size_t)gridDim.x * blockDim.x) {
        const double u1 = pk_splitmix_unit(key + 2 * i), u2 = pk_splitmix_unit(key + 2 * i + 1);
        const double z = sqrt(-2.0 * log(u1 > 0 ? u1 : 1e-300)) * cos(6.283185307179586 * u2);
        x[i] = __float2bfloat16((float)(scale * z));
    }
}

static int generate(const pk_problem_call *call, uint64_t seed, int trial) {
    const pk_ctx *ctx = call->ctx;
    const int cp_rank = ctx->rank / 2, tp_rank = ctx->rank % 2;
    const uint64_t base = pk_splitmix64(seed ^ pk_splitmix64(0x35350000ULL + (uint64_t)trial));
    float hscale = 1.f;
    if (trial & 1)
        hscale = (float)exp2(2.0 * pk_splitmix_unit(base + 7 + (uint64_t)cp_rank) - 1.0);
    const uint64_t keys[3] = {pk_splitmix64(base + 100 + (uint64_t)cp_rank),
                              pk_splitmix64(base + 200 + (uint64_t)tp_rank),
                              pk_splitmix64(base + 300 + (uint64_t)tp_rank)};
    const float scales[3] = {hscale, 0.02f, 0.02f};
    for (int a = 0; a < 3; a++) {
        fill_normal<<<264, 256, 0, ctx->stream>>>(static_cast<bf16 *>(call->args[a]),
                                                  call->counts[a], keys[a], scales[a]);
        if (cudaGetLastError() != cudaSuccess)
            return 2000;
    }
    return 0;
}

static int invoke(void *fn, const pk_problem_call *c) {
    if (!fn || c->n_args != 4 || c->n_dims < 6 || c->n_params < 1)
        return -1;
    return reinterpret_cast<entry_fn>(fn)(
        c->ctx, static_cast<const bf16 *>(c->args[0]), static_cast<const bf16 *>(c->args[1]),
        static_cast<const bf16 *>(c->args[2]), static_cast<bf16 *>(c->args[3]), (size_t)c->dims[0],
        (size_t)c->dims[5], (size_t)c->dims[2], (size_t)c->dims[3], (float)c->params[0]);
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, invoke, generate, init, fini, NULL};
    return &module;
}
