// pkb/81_sam3_allgather_iou_suppression (ParallelKernelBench problem 81): SAM 3's cross-GPU
// suppression of duplicate tracked objects. Rank r holds n_r object masks (masks, a C x H x Wd
// bf16 capacity whose first n_r = counts[r] masks are its shard; 0 <= n_r <= C, ragged) and their
// scores; counts[W] and last_occluded[T] (T = sum n_q, in rank order) are the same on every
// rank. Every rank returns the all-gathered masks as fp32 (rank order), with the masks of the
// suppressed objects set to -10, the gathered scores as fp32, and the suppression flags; the
// capacities' tails (rows T .. W C - 1) are zero. Object x is suppressed iff some other object y
// has IoU(x, y) >= iou_threshold (binary masks `> 0`; IoU = fp32(I) / fp32(max(U, 1)) rounded
// once, compared in fp32), last_occluded[y] > -1 and last_occluded[x] > last_occluded[y]
// (< when reverse). Every step is exact (integer counts, one rounded division, strict or
// non-strict comparisons the contract names), so the output is unique: exact checkers.
#include "pk_problem_module.h"
#include "pk_splitmix.h"

#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <stdint.h>
#include <stdlib.h>

typedef __nv_bfloat16 bf16;

typedef int (*entry_fn)(const pk_ctx *, const bf16 *, const bf16 *, const int64_t *,
                        const int64_t *, float *, float *, uint8_t *, size_t, size_t, size_t, float,
                        int);

// The runner's call keys (problems/runner/pk_runner.h).
#define KEY_POST_TIMING (1 << 20)
#define KEY_TIMED_BASE (1 << 21)
#define NO_OBJ_LOGIT (-10.0f)

static int cuda_code(cudaError_t e) {
    return e == cudaSuccess ? 0 : 2000 + (int)e;
}

static int nccl_code(ncclResult_t r) {
    return r == ncclSuccess ? 0 : 1000 + (int)r;
}

static int blas_code(cublasStatus_t s) {
    return s == CUBLAS_STATUS_SUCCESS ? 0 : 3000 + (int)s;
}

// ---------------------------------------------------------------------------------------------
// The inputs' design (generate()), ported line by line by bench/pkb/sim_81_*.py.
//
// Trials by key % 5: 0 PKB's (counts 1 + (q + key) % 3, PKB's masks: the generic N(0, 1) draw
// + 4 on PKB's stripes - 1, last_occluded (g % 5) - 1: nothing overlaps enough to suppress);
// 1 ragged counts 0..C; 2 every rank C; 3 one rank C, the others 0..C/8, times in {-1, 0, 1};
// 4 one rank C, the others empty. After timing: as 1. Timed calls: every rank C, designed.
// Designed masks (classes 1-4 and timed): the objects are cut into groups of 4 by an affine
// permutation of [0, T) (design_slot: a group's members sit on different ranks); a group's pixels
// are ordered by an affine bijection pos(p) = (p * mul + add) mod HW (mul a prime above 2^20) and
// its base mask is pos in [0, L), L = 1190 (1 + h % 3) (1190 = 2 5 7 17: every bound below is an
// integer). Slot 0: the base; slot 1: IoU exactly 0.7 with it ([0, 7L/10), [0, 10L/7) or
// [3L/17, L + 3L/17)); slot 2: a duplicate of the base (IoU 1) with slot 0's time; slot 3: any
// of base, duplicate, the three exact ones, [0, 7L/10 - 1) (one pixel under 0.7), empty, or an
// unrelated set. Times (design_time): slots 0 and 2 equal (>= 0), slot 1 later, slot 3 random
// in -1..3. So every full group has objects suppressed only through IoUs of exactly 0.7 (unless
// slot 3 reaches them too), and two duplicates with equal times that must not suppress each
// other. Pixels outside a mask are 0, -0 or negative (`> 0` is false for all of them).
// ---------------------------------------------------------------------------------------------

#define N_PRIMES 4
__host__ __device__ static inline uint64_t design_prime(int i) {
    return i == 0 ? 1048583ull : i == 1 ? 1048589ull : i == 2 ? 1048601ull : 1048609ull;
}

__host__ __device__ static inline uint64_t dh(uint64_t ck, uint64_t a, uint64_t b) {
    return pk_splitmix64(ck + (a << 40) + b);
}

struct object_design {
    uint64_t mul, add; // pos(p) = (p * mul + add) % HW
    long long lo, hi;  // the mask: lo <= pos(p) < hi
};

// Object g's group and slot: an affine permutation of [0, T) (104729 is a prime above any T)
// cut into groups of 4, so a group's members are spread over the ranks.
__host__ __device__ static inline long long design_slot(uint64_t ck, long long g, long long T) {
    return (long long)(((uint64_t)g * 104729ull + dh(ck, 12, 0) % (uint64_t)T) % (uint64_t)T);
}

__host__ __device__ static inline object_design design_of(uint64_t ck, long long g, long long T,
                                                          long long HW) {
    const long long pi = design_slot(ck, g, T);
    const uint64_t grp = (uint64_t)(pi / 4);
    const int slot = (int)(pi % 4);
    const int exact[3] = {2, 4, 5};
    const int v = slot == 0   ? 0
                  : slot == 1 ? exact[dh(ck, 2, (uint64_t)g) % 3]
                  : slot == 2 ? 1
                              : (int)(dh(ck, 2, (uint64_t)g) % 8);
    const long long L = 1190 * (1 + (long long)(dh(ck, 3, grp) % 3));
    object_design d;
    d.mul = design_prime((int)(dh(ck, 4, grp) % N_PRIMES));
    d.add = dh(ck, 5, grp) % (uint64_t)HW;
    d.lo = 0;
    d.hi = L;
    if (v == 2) {
        d.hi = 7 * L / 10;
    } else if (v == 3) {
        d.hi = 7 * L / 10 - 1;
    } else if (v == 4) {
        d.hi = 10 * L / 7;
    } else if (v == 5) {
        d.lo = 3 * L / 17;
        d.hi = L + 3 * L / 17;
    } else if (v == 6) {
        d.hi = 0;
    } else if (v == 7) { // unrelated: its own bijection and length
        d.mul = design_prime((int)(dh(ck, 6, (uint64_t)g) % N_PRIMES));
        d.add = dh(ck, 7, (uint64_t)g) % (uint64_t)HW;
        d.hi = 500 + (long long)(dh(ck, 8, (uint64_t)g) % 4000);
    }
    return d;
}

// Slots 0 and 2 (duplicates) share a time a in 0..2, slot 1 (exactly 0.7 from both) a + 1 or
// a + 2, slot 3 a random time in -1..3 (class 3: -1..1).
__host__ __device__ static inline long long design_time(uint64_t ck, long long g, long long T,
                                                        int cls) {
    const long long pi = design_slot(ck, g, T);
    const uint64_t grp = (uint64_t)(pi / 4);
    const long long a = (long long)(dh(ck, 13, grp) % 3);
    switch (pi % 4) {
    case 0:
    case 2:
        return a;
    case 1:
        return a + 1 + (long long)(dh(ck, 14, grp) % 2);
    default:
        return (long long)(dh(ck, 9, (uint64_t)g) % (cls == 3 ? 3 : 5)) - 1;
    }
}

struct plan {
    int cls; // 0 PKB's; 1-4 designed; 5 timed (designed, every rank C)
    long long n[PK_MAX_RANKS], start[PK_MAX_RANKS + 1];
    uint64_t ck;
};

static plan make_plan(uint64_t seed, int key, int world, long long C) {
    plan p;
    p.ck = pk_splitmix64(seed ^ pk_splitmix64(0x81ull << 40 ^ (uint64_t)(unsigned)key));
    p.cls = key >= KEY_TIMED_BASE ? 5 : key == KEY_POST_TIMING ? 1 : key % 5;
    const int big = (int)(dh(p.ck, 11, 0) % (uint64_t)world);
    for (int q = 0; q < world; q++) {
        const uint64_t h = dh(p.ck, 10, (uint64_t)q);
        long long n;
        if (p.cls == 0)
            n = 1 + (q + key) % 3;
        else if (p.cls == 1)
            n = (long long)(h % (uint64_t)(C + 1));
        else if (p.cls == 2 || p.cls == 5)
            n = C;
        else if (p.cls == 3)
            n = q == big ? C : (long long)(h % (uint64_t)(C / 8 + 1));
        else
            n = q == big ? C : 0;
        p.n[q] = n < C ? n : C;
    }
    p.start[0] = 0;
    for (int q = 0; q < world; q++)
        p.start[q + 1] = p.start[q] + p.n[q];
    return p;
}

struct plan_dev {
    long long n[PK_MAX_RANKS], start[PK_MAX_RANKS + 1];
};

static unsigned grid_for(long long n) {
    const long long b = (n + 255) / 256;
    return (unsigned)(b < 1 ? 1 : b < 16384 ? b : 16384);
}

// Rank `me`'s masks rows [0, n) (the capacity past n keeps the generic draw).
__global__ void fill_masks(bf16 *masks, long long n, long long g0, long long T, long long H,
                           long long Wd, uint64_t ck, int cls, int me) {
    const long long HW = H * Wd;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n * HW;
         i += (long long)gridDim.x * blockDim.x) {
        const long long l = i / HW, p = i % HW;
        float v;
        if (cls == 0) { // PKB's: randn + 4 on the stripes (y + x + l + rank) % 5 == 0, - 1
            const long long y = p / Wd, x = p % Wd;
            const float pat = ((y + x + l + me) % 5 == 0) ? 4.f : 0.f;
            const float a = __bfloat162float(__float2bfloat16(__bfloat162float(masks[i]) + pat));
            v = a - 1.f;
        } else {
            const object_design d = design_of(ck, g0 + l, T, HW);
            const long long pos = (long long)(((uint64_t)p * d.mul + d.add) % (uint64_t)HW);
            const uint64_t u =
                pk_splitmix64((ck ^ 0x5a3ull) ^ ((uint64_t)(g0 + l) << 21) ^ (uint64_t)p);
            const float m = 0.25f * (float)(u % 8);
            v = (pos >= d.lo && pos < d.hi) ? m + 0.25f : -m; // -m: 0 -> -0
        }
        masks[i] = __float2bfloat16(v);
    }
}

__global__ void fill_shared(int64_t *counts, int64_t *last_occluded, plan_dev pd, int W,
                            long long T, uint64_t ck, int cls) {
    for (long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x; g < T;
         g += (long long)gridDim.x * blockDim.x)
        last_occluded[g] = cls == 0 ? g % 5 - 1 : design_time(ck, g, T, cls);
    if (blockIdx.x == 0 && threadIdx.x < W)
        counts[threadIdx.x] = pd.n[threadIdx.x];
}

static int generate(const pk_problem_call *call, uint64_t seed, int key) {
    const pk_ctx *ctx = call->ctx;
    const int W = ctx->world_size, me = ctx->rank;
    const long long C = call->dims[0], H = call->dims[1], Wd = call->dims[2];
    const plan p = make_plan(seed, key, W, C);
    plan_dev pd;
    for (int q = 0; q < W; q++) {
        pd.n[q] = p.n[q];
        pd.start[q] = p.start[q];
    }
    pd.start[W] = p.start[W];
    const long long T = p.start[W];
    cudaStream_t s = ctx->stream;
    if (p.n[me] > 0)
        fill_masks<<<grid_for(p.n[me] * H * Wd), 256, 0, s>>>(
            static_cast<bf16 *>(call->args[0]), p.n[me], p.start[me], T, H, Wd, p.ck, p.cls, me);
    fill_shared<<<grid_for(T), 256, 0, s>>>(static_cast<int64_t *>(call->args[2]),
                                            static_cast<int64_t *>(call->args[3]), pd, W, T, p.ck,
                                            p.cls);
    return cuda_code(cudaGetLastError());
}

// ---------------------------------------------------------------------------------------------
// The reference: PKB's steps. The masks and scores cast to fp32 and all-gathered in rank order
// (PKB's all_gather of variable sizes: a grouped ncclBroadcast per rank, straight into masks_out
// and scores_out), the gathered masks binarised (> 0) into a bf16 0/1 matrix, the intersections
// I = B B^T by one cuBLAS GEMM (bf16 tensor cores, fp32 accumulation: exact for 0/1 products,
// sums < 2^24; PKB's fp32 matmul), the areas its diagonal, then PKB's suppression rule per object
// and the suppressed rows set to -10. counts come to the host once (PKB's num_obj_per_gpu is a
// Python list).
// ---------------------------------------------------------------------------------------------

static struct {
    cublasHandle_t blas;
    void *blas_ws;
    float *stage; // registered: this rank's masks and scores in fp32 (the broadcasts' source)
    size_t stage_bytes;
    ncclWindow_t win;
    bf16 *bin;    // T x HW, 0/1
    float *inter; // T x T
    size_t plain_bytes;
    int64_t *host;
} g_ref;

#define BLAS_WS_BYTES (32u << 20)

static int init(const pk_ctx *ctx) {
    if (g_ref.blas)
        return 0;
    int rc = blas_code(cublasCreate(&g_ref.blas));
    if (!rc)
        rc = cuda_code(cudaMalloc(&g_ref.blas_ws, BLAS_WS_BYTES));
    if (!rc)
        rc = blas_code(cublasSetWorkspace(g_ref.blas, g_ref.blas_ws, BLAS_WS_BYTES));
    if (!rc)
        rc = cuda_code(cudaMallocHost((void **)&g_ref.host, PK_MAX_RANKS * sizeof(int64_t)));
    return rc;
}

static void fini(const pk_ctx *ctx) {
    if (g_ref.stage) {
        ncclCommWindowDeregister(ctx->comm, g_ref.win);
        ncclMemFree(g_ref.stage);
    }
    cudaFree(g_ref.bin);
    if (g_ref.blas)
        cublasDestroy(g_ref.blas);
    cudaFree(g_ref.blas_ws);
    cudaFreeHost(g_ref.host);
    g_ref = {};
}

static int ref_buffers(const pk_ctx *ctx, long long C, long long HW) {
    const int W = ctx->world_size;
    const size_t stage = 4 * (size_t)C * (HW + 1);
    if (g_ref.stage_bytes < stage) {
        if (g_ref.stage) {
            ncclCommWindowDeregister(ctx->comm, g_ref.win);
            ncclMemFree(g_ref.stage);
            g_ref.stage = NULL;
            g_ref.stage_bytes = 0;
        }
        int rc = nccl_code(ncclMemAlloc((void **)&g_ref.stage, stage));
        if (!rc)
            rc = nccl_code(ncclCommWindowRegister(ctx->comm, g_ref.stage, stage, &g_ref.win,
                                                  NCCL_WIN_COLL_SYMMETRIC));
        if (rc)
            return rc;
        g_ref.stage_bytes = stage;
    }
    const size_t WC = (size_t)W * C;
    const size_t bin = (2 * WC * HW + 255) / 256 * 256, plain = bin + 4 * WC * WC;
    if (g_ref.plain_bytes < plain) {
        cudaFree(g_ref.bin);
        g_ref.bin = NULL;
        g_ref.plain_bytes = 0;
        int rc = cuda_code(cudaMalloc((void **)&g_ref.bin, plain));
        if (rc)
            return rc;
        g_ref.plain_bytes = plain;
    }
    g_ref.inter = reinterpret_cast<float *>(reinterpret_cast<char *>(g_ref.bin) + bin);
    return 0;
}

__global__ void to_fp32(const bf16 *masks, const bf16 *scores, float *stage, long long n,
                        long long HW) {
    const long long total = n * HW;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total + n;
         i += (long long)gridDim.x * blockDim.x)
        stage[i] = i < total ? __bfloat162float(masks[i]) : __bfloat162float(scores[i - total]);
}

__global__ void binarize(const float *m, bf16 *bin, long long total) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x)
        bin[i] = __float2bfloat16(m[i] > 0.f ? 1.f : 0.f);
}

// PKB's _suppression_mask: x is suppressed iff some y != x has IoU >= thr (fp32), cmp(t_x, t_y)
// and t_y > -1 (its triu pairs read both ways). The areas are I's diagonal. Flags past T: 0.
__global__ void suppression(const float *inter, const int64_t *t, uint8_t *flags, long long T,
                            long long WC, float thr, int reverse) {
    for (long long x = (long long)blockIdx.x * blockDim.x + threadIdx.x; x < WC;
         x += (long long)gridDim.x * blockDim.x) {
        bool sup = false;
        if (x < T && T > 1) {
            const float ax = inter[x * T + x];
            const long long tx = t[x];
            for (long long y = 0; y < T && !sup; y++) {
                if (y == x)
                    continue;
                const float i = inter[x * T + y];
                const float u = fmaxf(ax + inter[y * T + y] - i, 1.f);
                const bool over = __fdiv_rn(i, u) >= thr;
                const long long ty = t[y];
                sup = over && (reverse ? tx < ty : tx > ty) && ty > -1;
            }
        }
        flags[x] = sup ? 1 : 0;
    }
}

// masks_out rows x < T with flags[x]: -10; rows >= T and scores_out past T: 0.
__global__ void apply(float *masks_out, float *scores_out, const uint8_t *flags, long long T,
                      long long WC, long long HW) {
    const long long total = WC * HW;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const long long x = i / HW;
        if (x >= T)
            masks_out[i] = 0.f;
        else if (flags[x])
            masks_out[i] = NO_OBJ_LOGIT;
        if (i < WC && i >= T)
            scores_out[i] = 0.f;
    }
}

static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const int W = ctx->world_size, me = ctx->rank;
    const long long C = call->dims[0], HW = call->dims[1] * call->dims[2], WC = W * C;
    const bf16 *masks = static_cast<const bf16 *>(call->args[0]);
    const bf16 *scores = static_cast<const bf16 *>(call->args[1]);
    const int64_t *counts = static_cast<const int64_t *>(call->args[2]);
    const int64_t *t = static_cast<const int64_t *>(call->args[3]);
    float *masks_out = static_cast<float *>(call->args[4]);
    float *scores_out = static_cast<float *>(call->args[5]);
    uint8_t *flags = static_cast<uint8_t *>(call->args[6]);
    const float thr = (float)call->params[0];
    const int reverse = call->params[1] != 0;
    cudaStream_t s = ctx->stream;
    int rc = ref_buffers(ctx, C, HW);
    if (!rc)
        rc = cuda_code(
            cudaMemcpyAsync(g_ref.host, counts, 8 * (size_t)W, cudaMemcpyDeviceToHost, s));
    if (!rc)
        rc = cuda_code(cudaStreamSynchronize(s));
    if (rc)
        return rc;
    long long start[PK_MAX_RANKS + 1];
    start[0] = 0;
    for (int q = 0; q < W; q++) {
        const long long n = g_ref.host[q] < 0 ? 0 : g_ref.host[q] > C ? C : g_ref.host[q];
        start[q + 1] = start[q] + n;
    }
    const long long T = start[W], n_me = start[me + 1] - start[me];
    float *stage = g_ref.stage;
    if (n_me > 0) {
        to_fp32<<<grid_for(n_me * (HW + 1)), 256, 0, s>>>(masks, scores, stage, n_me, HW);
        rc = cuda_code(cudaGetLastError());
    }
    if (!rc)
        rc = nccl_code(ncclGroupStart());
    for (int q = 0; q < W && !rc; q++) {
        const long long n = start[q + 1] - start[q];
        if (n == 0)
            continue;
        rc = nccl_code(ncclBroadcast(stage, masks_out + start[q] * HW, (size_t)(n * HW),
                                     ncclFloat32, q, ctx->comm, s));
        if (!rc)
            rc = nccl_code(ncclBroadcast(stage + n * HW, scores_out + start[q], (size_t)n,
                                         ncclFloat32, q, ctx->comm, s));
    }
    const int end = nccl_code(ncclGroupEnd());
    if (rc || end)
        return rc ? rc : end;
    if (T > 1) {
        binarize<<<grid_for(T * HW), 256, 0, s>>>(masks_out, g_ref.bin, T * HW);
        rc = cuda_code(cudaGetLastError());
        // Row-major B (T x HW) is column-major X (HW x T); I = X^T X (T x T, symmetric).
        const float one = 1.f, zero = 0.f;
        if (!rc) // cublasSetStream resets the workspace to the default pool: set it again
            rc = blas_code(cublasSetStream(g_ref.blas, s));
        if (!rc)
            rc = blas_code(cublasSetWorkspace(g_ref.blas, g_ref.blas_ws, BLAS_WS_BYTES));
        if (!rc)
            rc = blas_code(cublasGemmEx(g_ref.blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)T, (int)T,
                                        (int)HW, &one, g_ref.bin, CUDA_R_16BF, (int)HW, g_ref.bin,
                                        CUDA_R_16BF, (int)HW, &zero, g_ref.inter, CUDA_R_32F,
                                        (int)T, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        if (rc)
            return rc;
    }
    suppression<<<grid_for(WC), 256, 0, s>>>(g_ref.inter, t, flags, T, WC, thr, reverse);
    rc = cuda_code(cudaGetLastError());
    if (!rc) {
        apply<<<grid_for(WC * HW), 256, 0, s>>>(masks_out, scores_out, flags, T, WC, HW);
        rc = cuda_code(cudaGetLastError());
    }
    return rc;
}

static int invoke(void *fn, const pk_problem_call *c) {
    if (!fn || c->n_args != 7 || c->n_dims < 3 || c->n_params < 2)
        return -1;
    return reinterpret_cast<entry_fn>(fn)(
        c->ctx, static_cast<const bf16 *>(c->args[0]), static_cast<const bf16 *>(c->args[1]),
        static_cast<const int64_t *>(c->args[2]), static_cast<const int64_t *>(c->args[3]),
        static_cast<float *>(c->args[4]), static_cast<float *>(c->args[5]),
        static_cast<uint8_t *>(c->args[6]), (size_t)c->dims[0], (size_t)c->dims[1],
        (size_t)c->dims[2], (float)c->params[0], c->params[1] != 0 ? 1 : 0);
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, invoke, generate, init, fini, NULL};
    return &module;
}
