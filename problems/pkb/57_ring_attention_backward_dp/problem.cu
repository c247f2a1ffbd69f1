// pkb/57_ring_attention_backward_dp: ParallelKernelBench problem 57
// (reference/57_ring_attention_backward_dp.py), the backward of (non-causal) ring attention over
// a context-parallel group, averaged over a data-parallel group. W ranks = DP 2 x CP W/2 in
// Megatron's 'cp-dp' order (rank = dp_rank * CP + cp_rank): the CP groups are the replicas'
// contiguous blocks {d CP, ..., d CP + CP - 1}, the DP groups the pairs {c, c + CP}. Rank
// (d, c) holds q, k, v, dout and out (B, S, H, D) of its sequence shard and softmax_lse (B, H, S,
// fp32): out and lse are the forward over its OWN keys only (PKB's generator). It computes PKB's
// _ring_attn_backward over the CP group (K, V = every CP rank's k, v):
//   P = exp(scale q K^T - lse), dS = P (dout V^T - rowsum(dout * out)),
//   dq = scale dS K (over all keys), dk, dv of its own keys = sum over the CP group's queries
//   of scale dS^T q and P^T dout (dK, dV travel the ring in fp32),
// each rounded to bf16, then averages dq, dk, dv over its DP pair (bf16 all-reduce sum, / 2).
#include "pk_problem_module.h"

#include <cuda_bf16.h>

#include "pk_attention.cuh"

typedef __nv_bfloat16 bf16;
typedef int (*entry_fn)(const pk_ctx *, const bf16 *, const bf16 *, const bf16 *, const bf16 *,
                        const bf16 *, const float *, bf16 *, bf16 *, bf16 *, size_t, size_t, size_t,
                        size_t, float);

static struct {
    ncclComm_t cp, dp; // split once in init()
    bf16 *kv, *ring;   // k, v copied out of the arena; the ring's two (k, v) receive buffers
    float *work;       // pk_attn_ring_backward's dq, dK/dV pairs and D
    float *gen;        // generate(): the forward's fp32 output and lse
    size_t n, gen_n;   // B S H D of the allocations
} g;

static int nccl_code(ncclResult_t r) {
    return r == ncclSuccess ? 0 : 1000 + (int)r;
}

static int cuda_code(cudaError_t e) {
    return e == cudaSuccess ? 0 : 2000 + (int)e;
}

static int init(const pk_ctx *ctx) {
    const int cp = ctx->world_size / 2; // PKB: dp_size = min(2, W) = 2
    int rc = nccl_code(ncclCommSplit(ctx->comm, ctx->rank / cp, ctx->rank, &g.cp, NULL));
    if (!rc)
        rc = nccl_code(ncclCommSplit(ctx->comm, ctx->rank % cp, ctx->rank, &g.dp, NULL));
    return rc;
}

static void buffers_free(void) {
    cudaFree(g.kv);
    cudaFree(g.ring);
    cudaFree(g.work);
    g.kv = g.ring = NULL;
    g.work = NULL;
    g.n = 0;
}

static void fini(const pk_ctx *ctx) {
    (void)ctx;
    buffers_free();
    cudaFree(g.gen);
    g.gen = NULL;
    g.gen_n = 0;
    if (g.cp)
        ncclCommDestroy(g.cp);
    if (g.dp)
        ncclCommDestroy(g.dp);
    g.cp = g.dp = NULL;
}

// n = B S H D elements of each of q, k, v, dout on this rank; rows = B S H.
static int buffers_reserve(const pk_ctx *ctx, size_t n, size_t rows) {
    if (g.n >= n)
        return 0;
    if (cudaStreamSynchronize(ctx->stream) != cudaSuccess)
        return 2001;
    buffers_free();
    int rc = cuda_code(cudaMalloc(&g.kv, 2 * n * sizeof(bf16)));
    if (!rc)
        rc = cuda_code(cudaMalloc(&g.ring, 4 * n * sizeof(bf16)));
    if (!rc)
        rc = cuda_code(cudaMalloc(&g.work, (5 * n + rows) * sizeof(float)));
    if (!rc)
        g.n = n;
    return rc;
}

// x *= 0.5 in bf16 (PKB's g.div_(dp_size), exact for dp_size 2).
__global__ void halve(bf16 *x, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        x[i] = __float2bfloat16(__bfloat162float(x[i]) * 0.5f);
}

// Baseline, PKB's steps one after another: k and v copied out of the arena (the ring's
// host-driven send/recv cannot use it: NCCL 2.28.3), pk_attn_ring_backward of pk_attention.cuh
// on the CP communicator (D = rowsum(dout * out), then per step the flash-style dQ and dK/dV
// tiles and NCCL send/recv of k, v (bf16) and the running dK, dV (fp32) to rank r + 1; dq, dk,
// dv rounded to bf16), then per gradient a bf16 all-reduce (sum) over the DP pair (NCCL) and the
// halving.
static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const int B = (int)call->dims[0], H = (int)call->dims[2], S = (int)call->dims[5];
    const int cp = ctx->world_size / 2;
    const size_t n = (size_t)B * S * H * PK_ATTN_D;
    int rc = buffers_reserve(ctx, n, (size_t)B * S * H);
    if (rc)
        return rc;
    for (int j = 0; j < 2 && !rc; j++) // k, v
        rc = cuda_code(cudaMemcpyAsync(g.kv + (size_t)j * n, call->args[2 + j], n * sizeof(bf16),
                                       cudaMemcpyDeviceToDevice, ctx->stream));
    if (rc)
        return rc;
    PkAttnRingBwd r = {};
    r.dout = static_cast<const bf16 *>(call->args[0]);
    r.q = static_cast<const bf16 *>(call->args[1]);
    r.k = g.kv;
    r.v = g.kv + n;
    r.out = static_cast<const bf16 *>(call->args[4]);
    r.lse = static_cast<const float *>(call->args[5]);
    bf16 *grads[3] = {static_cast<bf16 *>(call->args[6]), static_cast<bf16 *>(call->args[7]),
                      static_cast<bf16 *>(call->args[8])};
    r.dq = grads[0];
    r.dk = grads[1];
    r.dv = grads[2];
    r.B = B;
    r.S = S;
    r.H = H;
    r.causal = 0; // PKB's inputs pass causal=False
    r.scale = (float)call->params[0];
    r.comm = g.cp;
    r.rank = ctx->rank % cp;
    r.world = cp;
    r.ring = g.ring;
    r.work = g.work;
    rc = pk_attn_ring_backward(r, ctx->stream);
    for (int j = 0; j < 3 && !rc; j++) {
        rc = nccl_code(
            ncclAllReduce(grads[j], grads[j], n, ncclBfloat16, ncclSum, g.dp, ctx->stream));
        if (!rc) {
            halve<<<264, 256, 0, ctx->stream>>>(grads[j], n);
            rc = cuda_code(cudaGetLastError());
        }
    }
    return rc;
}

// PKB's generator: out and softmax_lse are the forward of the rank's own q, k, v over its own
// keys (non-causal, fp32 softmax, out rounded to bf16, lse (B, H, S)). Here the forward is
// pk_attention.cuh's tile on the inputs as the regimes drew them (q, k: iid or rank; v, dout:
// every regime), its fp32 output rounded to bf16 and its lse transposed to (B, H, S).
__global__ void finish_forward(const float *acc, const float *lse_bsh, bf16 *out, float *lse, int B,
                               int S, int H) {
    const size_t n = (size_t)B * S * H * PK_ATTN_D, rows = (size_t)B * S * H;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        out[i] = __float2bfloat16(acc[i]);
        if (i < rows) {
            const size_t h = i % H, s = i / H % S, b = i / H / S;
            lse[(b * H + h) * S + s] = lse_bsh[i];
        }
    }
}

static int generate(const pk_problem_call *call, uint64_t seed, int trial) {
    (void)seed;
    (void)trial;
    const pk_ctx *ctx = call->ctx;
    const int B = (int)call->dims[0], H = (int)call->dims[2], S = (int)call->dims[5];
    const size_t n = (size_t)B * S * H * PK_ATTN_D, rows = (size_t)B * S * H;
    if (g.gen_n < n) {
        if (cudaStreamSynchronize(ctx->stream) != cudaSuccess)
            return 2001;
        cudaFree(g.gen);
        g.gen_n = 0;
        int rc = cuda_code(cudaMalloc(&g.gen, (n + rows) * sizeof(float)));
        if (rc)
            return rc;
        g.gen_n = n;
    }
    PkAttnBlock a = {};
    a.q = static_cast<const bf16 *>(call->args[1]);
    a.k = static_cast<const bf16 *>(call->args[2]);
    a.v = static_cast<const bf16 *>(call->args[3]);
    a.B = B;
    a.Sq = a.Sk = S;
    a.H = H;
    a.scale = (float)call->params[0];
    a.acc_out = g.gen;
    a.lse_out = g.gen + n;
    // P split into two bf16 terms (~16 bits): PKB's forward is fp32 attention.
    int rc = cuda_code(pk_attn_fwd_launch<PK_ATTN_D, PK_ATTN_P_SPLIT>(a, ctx->stream));
    if (rc)
        return rc;
    finish_forward<<<264, 256, 0, ctx->stream>>>(g.gen, g.gen + n,
                                                 static_cast<bf16 *>(call->args[4]),
                                                 static_cast<float *>(call->args[5]), B, S, H);
    return cuda_code(cudaGetLastError());
}

static int invoke(void *fn, const pk_problem_call *c) {
    if (!fn || c->n_args != 9 || c->n_dims < 6 || c->n_params < 1)
        return -1;
    return reinterpret_cast<entry_fn>(fn)(
        c->ctx, static_cast<const bf16 *>(c->args[0]), static_cast<const bf16 *>(c->args[1]),
        static_cast<const bf16 *>(c->args[2]), static_cast<const bf16 *>(c->args[3]),
        static_cast<const bf16 *>(c->args[4]), static_cast<const float *>(c->args[5]),
        static_cast<bf16 *>(c->args[6]), static_cast<bf16 *>(c->args[7]),
        static_cast<bf16 *>(c->args[8]), (size_t)c->dims[0], (size_t)c->dims[5], (size_t)c->dims[2],
        (size_t)c->dims[3], (float)c->params[0]);
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, invoke, generate, init, fini, NULL};
    return &module;
}
