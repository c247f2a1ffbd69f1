// pkb/80_dinov2_distributed_sinkhorn_knopp (ParallelKernelBench problem 80): DINOv2's
// Sinkhorn-Knopp centering of the teacher's prototype scores, over a batch split across ranks.
// Rank r holds teacher_output (B x K fp32: B samples, K prototypes) and n_masked (one int64,
// its batch size as PKB passes it). With q = exp(teacher_output / teacher_temp) (B x K here,
// PKB's q.T), PKB computes
//   q /= sum over every rank's q;                                      (all-reduce)
//   n_iter times: q[b][k] /= sum_{ranks, b'} q[b'][k]; q /= K;          (all-reduce of K sums)
//                 q[b][k] /= sum_{k'} q[b][k']; q /= total_batch;        (local)
//   q *= total_batch
// with total_batch the all-reduced n_masked, and every rank returns its B x K block of the
// result (fp32). The total mass and total_batch cancel mathematically; the per-prototype sums
// over the whole batch (all ranks) do not.
#include "pk_problem_module.h"
#include "pk_splitmix.h"

#include <math.h>

typedef int (*entry_fn)(const pk_ctx *, const float *, const int64_t *, float *, size_t, size_t,
                        size_t, float);

static int cuda_code(cudaError_t e) {
    return e == cudaSuccess ? 0 : 2000 + (int)e;
}

static int nccl_code(ncclResult_t r) {
    return r == ncclSuccess ? 0 : 1000 + (int)r;
}

// The reference's all-reduce buffers (ncclMemAlloc'ed and registered as an NCCL window: NCCL
// 2.28 can hang between registered and plain memory, docs/problems.md, known issues): [0, K)
// the per-prototype sums, [K] the total mass, [K + 1] total_batch; and, in plain memory, the
// per-sample sums. Made in the first reference call (a correctness trial: registration is
// collective).
static struct {
    float *red;
    size_t red_bytes;
    ncclWindow_t win;
    float *col;
    size_t col_bytes;
} g_ref;

static void fini(const pk_ctx *ctx) {
    if (g_ref.red) {
        ncclCommWindowDeregister(ctx->comm, g_ref.win);
        ncclMemFree(g_ref.red);
    }
    cudaFree(g_ref.col);
    g_ref = {};
}

static int ref_buffers(const pk_ctx *ctx, size_t B, size_t K) {
    const size_t bytes = (K + 2) * sizeof(float);
    if (g_ref.red_bytes < bytes) {
        if (g_ref.red) {
            ncclCommWindowDeregister(ctx->comm, g_ref.win);
            ncclMemFree(g_ref.red);
            g_ref.red = NULL;
            g_ref.red_bytes = 0;
        }
        int rc = nccl_code(ncclMemAlloc((void **)&g_ref.red, bytes));
        if (!rc)
            rc = nccl_code(ncclCommWindowRegister(ctx->comm, g_ref.red, bytes, &g_ref.win,
                                                  NCCL_WIN_COLL_SYMMETRIC));
        if (rc)
            return rc;
        g_ref.red_bytes = bytes;
    }
    if (g_ref.col_bytes < B * sizeof(float)) {
        cudaFree(g_ref.col);
        g_ref.col = NULL;
        g_ref.col_bytes = 0;
        int rc = cuda_code(cudaMalloc((void **)&g_ref.col, B * sizeof(float)));
        if (rc)
            return rc;
        g_ref.col_bytes = B * sizeof(float);
    }
    return 0;
}

#define THREADS 256

// A block-wide fp32 sum (THREADS threads); every thread gets it.
__device__ float block_sum(float v) {
    __shared__ float part[THREADS / 32];
    for (int o = 16; o > 0; o /= 2)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    __syncthreads();
    if (threadIdx.x % 32 == 0)
        part[threadIdx.x / 32] = v;
    __syncthreads();
    float s = 0.f;
    for (int w = 0; w < THREADS / 32; w++)
        s += part[w];
    return s;
}

// q = exp(t / temp) (PyTorch: the fp32 division, then exp), and this rank's total mass.
__global__ void exp_mass(const float *t, float *q, long long n, float temp, float *mass) {
    float s = 0.f;
    for (long long i = (long long)blockIdx.x * THREADS + threadIdx.x; i < n;
         i += (long long)gridDim.x * THREADS) {
        const float v = expf(t[i] / temp);
        q[i] = v;
        s += v;
    }
    s = block_sum(s);
    if (threadIdx.x == 0)
        atomicAdd(mass, s);
}

// total_batch as PyTorch has it: n_masked cast to fp32 (all-reduced in fp32 after).
__global__ void set_batch(const int64_t *n_masked, float *red, long long K) {
    red[K] = 0.f; // the mass, accumulated by exp_mass
    red[K + 1] = (float)*n_masked;
}

__global__ void scale_all(float *q, long long n, const float *by) {
    const float d = *by;
    for (long long i = (long long)blockIdx.x * THREADS + threadIdx.x; i < n;
         i += (long long)gridDim.x * THREADS)
        q[i] /= d;
}

// s[k] += sum of q[b][k] over this block's share of the samples (s zeroed before): PKB's
// q.sum(dim=1) of its K x B q (this rank's batch), split over SPLIT shares of the samples so
// that enough loads are in flight (a thread per prototype alone would leave HBM idle).
#define SPLIT 32
__global__ void proto_sums(const float *q, long long B, long long K, float *s) {
    const long long k = (long long)blockIdx.x * THREADS + threadIdx.x;
    if (k >= K)
        return;
    const long long b0 = B * blockIdx.y / SPLIT, b1 = B * (blockIdx.y + 1) / SPLIT;
    float acc = 0.f;
    for (long long b = b0; b < b1; b++)
        acc += q[b * K + k];
    atomicAdd(s + k, acc);
}

// q[b][k] = q[b][k] / s[k] / K (PKB: q /= row_sum; q /= num_prototypes: two roundings).
__global__ void div_protos(float *q, long long n, long long K, const float *s) {
    const float kf = (float)K;
    for (long long i = (long long)blockIdx.x * THREADS + threadIdx.x; i < n;
         i += (long long)gridDim.x * THREADS)
        q[i] = q[i] / s[i % K] / kf;
}

// c[b] = sum_k q[b][k] (PKB: q.sum(dim=0)), one block per sample.
__global__ void sample_sums(const float *q, long long K, float *c) {
    float acc = 0.f;
    for (long long k = threadIdx.x; k < K; k += THREADS)
        acc += q[blockIdx.x * K + k];
    acc = block_sum(acc);
    if (threadIdx.x == 0)
        c[blockIdx.x] = acc;
}

// q[b][k] = q[b][k] / c[b] / total_batch (PKB: q /= q.sum(dim=0); q /= total_batch).
__global__ void div_samples(float *q, long long n, long long K, const float *c, const float *tb) {
    const float t = *tb;
    for (long long i = (long long)blockIdx.x * THREADS + threadIdx.x; i < n;
         i += (long long)gridDim.x * THREADS)
        q[i] = q[i] / c[i / K] / t;
}

__global__ void times_batch(float *q, long long n, const float *tb) {
    const float t = *tb;
    for (long long i = (long long)blockIdx.x * THREADS + threadIdx.x; i < n;
         i += (long long)gridDim.x * THREADS)
        q[i] *= t;
}

static unsigned grid_for(long long n) {
    const long long b = (n + THREADS - 1) / THREADS;
    return (unsigned)(b < 4 * 132 * 8 ? b : 4 * 132 * 8);
}

// Baseline, PKB's steps one after another (no fusion across them, fp32 throughout, q kept in
// the output): exp, the total mass (all-reduce of one float) and total_batch (all-reduce of
// one float), q /= mass; then per iteration the K per-prototype sums over this rank's samples,
// an NCCL all-reduce of them, q /= sums, q /= K, the per-sample sums, q /= them and
// total_batch; finally q *= total_batch. Every elementwise step rounds where PyTorch's does.
static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const long long B = call->dims[0], K = call->dims[1], iters = call->dims[2], n = B * K;
    const float temp = (float)call->params[0];
    const float *t = static_cast<const float *>(call->args[0]);
    const int64_t *n_masked = static_cast<const int64_t *>(call->args[1]);
    float *q = static_cast<float *>(call->args[2]);
    cudaStream_t s = ctx->stream;
    int rc = ref_buffers(ctx, (size_t)B, (size_t)K);
    if (rc)
        return rc;
    float *sums = g_ref.red, *mass = g_ref.red + K, *tb = g_ref.red + K + 1;
    set_batch<<<1, 1, 0, s>>>(n_masked, g_ref.red, K);
    exp_mass<<<grid_for(n), THREADS, 0, s>>>(t, q, n, temp, mass);
    rc = cuda_code(cudaGetLastError());
    if (!rc) // the mass and total_batch in one all-reduce of two floats (PKB: two)
        rc = nccl_code(ncclAllReduce(mass, mass, 2, ncclFloat, ncclSum, ctx->comm, s));
    if (rc)
        return rc;
    scale_all<<<grid_for(n), THREADS, 0, s>>>(q, n, mass);
    for (long long it = 0; it < iters && !rc; it++) {
        rc = cuda_code(cudaMemsetAsync(sums, 0, (size_t)K * sizeof(float), s));
        if (!rc)
            proto_sums<<<dim3((unsigned)((K + THREADS - 1) / THREADS), SPLIT), THREADS, 0, s>>>(
                q, B, K, sums);
        if (!rc)
            rc = cuda_code(cudaGetLastError());
        if (!rc)
            rc = nccl_code(ncclAllReduce(sums, sums, (size_t)K, ncclFloat, ncclSum, ctx->comm, s));
        if (rc)
            break;
        div_protos<<<grid_for(n), THREADS, 0, s>>>(q, n, K, sums);
        sample_sums<<<(unsigned)B, THREADS, 0, s>>>(q, K, g_ref.col);
        div_samples<<<grid_for(n), THREADS, 0, s>>>(q, n, K, g_ref.col, tb);
        rc = cuda_code(cudaGetLastError());
    }
    if (rc)
        return rc;
    times_batch<<<grid_for(n), THREADS, 0, s>>>(q, n, tb);
    return cuda_code(cudaGetLastError());
}

// generate(): on odd call keys the teacher's scores are clustered, as real ones are (the
// collapse Sinkhorn centering prevents): sample b of rank r belongs to cluster
// perm_r(floor(64 u^3)) (skewed: the first of rank r's clusters takes ~40% of its samples, and
// every rank favours other clusters, perm_r(j) = (a_r j + s_r) % 64 with a_r odd), and its
// scores for that cluster's K/64 prototypes are raised by `boost` (0.2..0.35, e^2.9..e^5 after
// the temperature), on top of the regime's draw. The per-prototype sums then differ strongly
// between ranks and the iterations converge slowly: a kernel that skips the cross-rank sums or
// stops early fails (bench/pkb/sim_80_sinkhorn.c). Even keys keep the regime's draw (PKB's on
// iid). From (seed, key, rank, sample) alone: the harness can regenerate it.
__global__ void add_clusters(float *t, long long B, long long K, uint64_t kb, uint64_t a,
                             uint64_t sh, float boost) {
    const long long per = K / 64;
    for (long long i = (long long)blockIdx.x * THREADS + threadIdx.x; i < B * per;
         i += (long long)gridDim.x * THREADS) {
        const long long b = i / per;
        const double u = pk_splitmix_unit(kb + (uint64_t)b);
        const uint64_t j = (uint64_t)(64.0 * u * u * u) % 64, c = (j * a + sh) % 64;
        t[b * K + (long long)c * per + i % per] += boost;
    }
}

static int generate(const pk_problem_call *call, uint64_t seed, int key) {
    if (key % 2 == 0)
        return 0;
    const int r = call->ctx->rank;
    const long long B = call->dims[0], K = call->dims[1];
    const uint64_t k0 = pk_splitmix64(seed ^ pk_splitmix64(0x80c1ull << 32 ^ (uint64_t)key));
    const float boost = (float)(0.2 + 0.15 * pk_splitmix_unit(k0));
    const uint64_t a = 2 * (pk_splitmix64(k0 + 1 + (uint64_t)r) % 32) + 1,
                   sh = pk_splitmix64(k0 + 100 + (uint64_t)r) % 64,
                   kb = pk_splitmix64(k0 + 1000 + (uint64_t)r);
    add_clusters<<<grid_for(B * (K / 64)), THREADS, 0, call->ctx->stream>>>(
        static_cast<float *>(call->args[0]), B, K, kb, a, sh, boost);
    return cuda_code(cudaGetLastError());
}

static int invoke(void *fn, const pk_problem_call *c) {
    if (!fn || c->n_args != 3 || c->n_dims < 3 || c->n_params < 1)
        return -1;
    return reinterpret_cast<entry_fn>(fn)(
        c->ctx, static_cast<const float *>(c->args[0]), static_cast<const int64_t *>(c->args[1]),
        static_cast<float *>(c->args[2]), (size_t)c->dims[0], (size_t)c->dims[1],
        (size_t)c->dims[2], (float)c->params[0]);
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, invoke, generate, NULL, fini, NULL};
    return &module;
}
