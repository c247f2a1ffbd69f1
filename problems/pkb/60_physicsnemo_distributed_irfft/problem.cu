// pkb/60_physicsnemo_distributed_irfft (ParallelKernelBench problem 60): PhysicsNeMo's inverse
// 2-D real FFT of a half spectrum split across ranks along H. Rank r holds rows
// [r Hl, (r+1) Hl) (Hl = H / W) of the half spectrum X (B x C x H x (Wd/2 + 1), complex64,
// interleaved re, im) and returns columns [r c, (r+1) c) (c = Wd / W) of
//   Re(ifft along H of (ifft along W of Xfull)), each 1-D transform scaled by 1 / sqrt(n),
// B x C x H x c fp32, where Xfull (H x Wd per plane) completes X as PKB's _conj_pad_2d does:
// Xfull[h][k] = X[h][k] for k <= Wd/2, conj(X[(H - h) % H][Wd - k]) beyond
// (problems/include/pk_fft_transpose.cuh, pk_hermitian_src). That needs rows of other ranks:
// PKB all-gathers the whole zero-padded spectrum along H, flips it and scatters it back; the
// baseline all-gathers the half spectrum itself (half PKB's bytes) and completes its own rows.
// Then PKB's steps: ifft along W of the local rows, the all-to-all that splits W and
// concatenates H, ifft along H, the real part.
#include "pk_fft_transpose.cuh"
#include "pk_problem_module.h"

#include <cufft.h>
#include <math.h>

typedef int (*entry_fn)(const pk_ctx *, const float *, float *, size_t, size_t, size_t, size_t);

#define THREADS 256

static int cuda_code(cudaError_t e) {
    return e == cudaSuccess ? 0 : 2000 + (int)e;
}
static int nccl_code(ncclResult_t r) {
    return r == ncclSuccess ? 0 : 1000 + (int)r;
}
static int fft_code(cufftResult r) {
    return r == CUFFT_SUCCESS ? 0 : 4000 + (int)r;
}

// The reference's buffers and plans, made on the first call (a correctness trial, which every
// rank makes: window registration is collective) and remade if the dims change. NCCL's buffers
// (the gathered half spectrum, the all-to-all's send and receive halves) are registered windows
// (NCCL 2.28 can hang between the windowed arena and plain memory: docs/problems.md, known
// issues); the rows in plain memory.
struct RefWindow {
    float2 *ptr;
    size_t bytes;
    ncclWindow_t win;
};
static struct {
    long long O, H, Wd;
    RefWindow all, sendrecv;
    float2 *rows; // O x Hl x Wd: the completed local rows, then their ifft along W
    cufftHandle along_w, along_h;
    int plans;
} g_ref;

static void drop_window(const pk_ctx *ctx, RefWindow *w) {
    if (w->ptr) {
        ncclCommWindowDeregister(ctx->comm, w->win);
        ncclMemFree(w->ptr);
    }
    *w = RefWindow{};
}

static void release(const pk_ctx *ctx) {
    drop_window(ctx, &g_ref.all);
    drop_window(ctx, &g_ref.sendrecv);
    cudaFree(g_ref.rows);
    if (g_ref.plans) {
        cufftDestroy(g_ref.along_w);
        cufftDestroy(g_ref.along_h);
    }
    g_ref = {};
}

static void fini(const pk_ctx *ctx) {
    release(ctx);
}

static int make_window(const pk_ctx *ctx, RefWindow *w, size_t bytes) {
    int rc = nccl_code(ncclMemAlloc((void **)&w->ptr, bytes));
    if (!rc)
        rc = nccl_code(
            ncclCommWindowRegister(ctx->comm, w->ptr, bytes, &w->win, NCCL_WIN_COLL_SYMMETRIC));
    if (!rc)
        w->bytes = bytes;
    return rc;
}

static int ref_setup(const pk_ctx *ctx, long long O, long long H, long long Wd) {
    if (g_ref.plans && g_ref.O == O && g_ref.H == H && g_ref.Wd == Wd)
        return 0;
    int rc = cuda_code(cudaStreamSynchronize(ctx->stream));
    if (rc)
        return rc;
    release(ctx);
    const long long W = ctx->world_size, Hl = H / W, c = Wd / W, half = Wd / 2 + 1;
    const long long local = O * Hl * Wd; // complex elements of the rows
    rc = make_window(ctx, &g_ref.all, (size_t)(O * H * half) * sizeof(float2));
    if (!rc)
        rc = make_window(ctx, &g_ref.sendrecv, 2 * (size_t)local * sizeof(float2));
    if (!rc)
        rc = cuda_code(cudaMalloc((void **)&g_ref.rows, (size_t)local * sizeof(float2)));
    if (rc)
        return rc;
    // Along W: O Hl contiguous rows of Wd. Along H: c columns of length H, stride c, one apart,
    // per plane (O calls at offsets of H c: cuFFT's layout has one batch stride).
    int nw = (int)Wd, nh = (int)H;
    rc = fft_code(cufftPlanMany(&g_ref.along_w, 1, &nw, &nw, 1, (int)Wd, &nw, 1, (int)Wd, CUFFT_C2C,
                                (int)(O * Hl)));
    if (!rc) {
        rc = fft_code(cufftPlanMany(&g_ref.along_h, 1, &nh, &nh, (int)c, 1, &nh, (int)c, 1,
                                    CUFFT_C2C, (int)c));
        if (rc)
            cufftDestroy(g_ref.along_w);
    }
    if (rc)
        return rc;
    g_ref.plans = 1;
    g_ref.O = O;
    g_ref.H = H;
    g_ref.Wd = Wd;
    return 0;
}

// rows[o][i][k] = Xfull[o][rank Hl + i][k], from the gathered half spectrum (rank q's rows at
// [q O Hl half, ...), as ncclAllGather leaves them).
__global__ void complete_rows(const float2 *all, float2 *rows, long long O, long long H,
                              long long Wd, int rank, int world) {
    const long long Hl = H / world, half = Wd / 2 + 1, n = O * Hl * Wd;
    for (long long e = (long long)blockIdx.x * THREADS + threadIdx.x; e < n;
         e += (long long)gridDim.x * THREADS) {
        const long long o = e / (Hl * Wd), i = e / Wd % Hl, k = e % Wd;
        long long sh, sk;
        const int cj = pk_hermitian_src(rank * Hl + i, k, H, Wd, &sh, &sk);
        const float2 v = all[((sh / Hl * O + o) * Hl + sh % Hl) * half + sk];
        rows[e] = cj ? make_float2(v.x, -v.y) : v;
    }
}

// out = scale * Re(cols), O x H x c.
__global__ void real_part(const float2 *cols, float *out, long long n, float scale) {
    for (long long i = (long long)blockIdx.x * THREADS + threadIdx.x; i < n;
         i += (long long)gridDim.x * THREADS)
        out[i] = scale * cols[i].x;
}

static unsigned grid_for(long long n) {
    const long long b = (n + THREADS - 1) / THREADS;
    return (unsigned)(b < 4 * 132 * 8 ? b : 4 * 132 * 8);
}

// Baseline: ncclAllGather of the half spectrum; the completed local rows; cuFFT inverse C2C
// along W; the 1/sqrt(Wd) scale folded into the pack of the all-to-all (pk_fft_transpose.cuh);
// ncclSend / ncclRecv with every rank in one group; the unpack into O x H x c columns; cuFFT
// inverse along H (O calls of one strided plan); the real part with the 1/sqrt(H) scale.
static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const long long O = call->dims[0] * call->dims[1], H = call->dims[2], Wd = call->dims[3];
    const int W = ctx->world_size;
    const long long Hl = H / W, c = Wd / W, half = Wd / 2 + 1, local = O * Hl * Wd,
                    chunk = local / W;
    const float2 *x = static_cast<const float2 *>(call->args[0]);
    float *out = static_cast<float *>(call->args[1]);
    cudaStream_t s = ctx->stream;
    int rc = ref_setup(ctx, O, H, Wd);
    if (!rc)
        rc = fft_code(cufftSetStream(g_ref.along_w, s));
    if (!rc)
        rc = fft_code(cufftSetStream(g_ref.along_h, s));
    if (!rc)
        rc = nccl_code(
            ncclAllGather(x, g_ref.all.ptr, (size_t)(2 * O * Hl * half), ncclFloat, ctx->comm, s));
    if (rc)
        return rc;
    complete_rows<<<grid_for(local), THREADS, 0, s>>>(g_ref.all.ptr, g_ref.rows, O, H, Wd,
                                                      ctx->rank, W);
    rc = fft_code(cufftExecC2C(g_ref.along_w, (cufftComplex *)g_ref.rows,
                               (cufftComplex *)g_ref.rows, CUFFT_INVERSE));
    if (rc)
        return rc;
    float2 *send = g_ref.sendrecv.ptr, *recv = g_ref.sendrecv.ptr + local;
    pk_xpose_pack<<<grid_for(local), THREADS, 0, s>>>(g_ref.rows, send, PK_XPOSE_COLS, O, Hl, Wd, W,
                                                      (float)(1.0 / sqrt((double)Wd)));
    rc = cuda_code(cudaGetLastError());
    if (!rc)
        rc = nccl_code(ncclGroupStart());
    for (int q = 0; q < W && !rc; q++) {
        rc = nccl_code(ncclSend(send + q * chunk, (size_t)(2 * chunk), ncclFloat, q, ctx->comm, s));
        if (!rc)
            rc = nccl_code(
                ncclRecv(recv + q * chunk, (size_t)(2 * chunk), ncclFloat, q, ctx->comm, s));
    }
    const int end = nccl_code(ncclGroupEnd());
    if (rc || end)
        return rc ? rc : end;
    // the columns (O x H x c) reuse the send half: it is free once the group is done
    float2 *cols = send;
    pk_xpose_unpack<<<grid_for(local), THREADS, 0, s>>>(recv, cols, PK_XPOSE_COLS, O, Hl, Wd, W);
    for (long long o = 0; o < O && !rc; o++)
        rc = fft_code(cufftExecC2C(g_ref.along_h, (cufftComplex *)(cols + o * H * c),
                                   (cufftComplex *)(cols + o * H * c), CUFFT_INVERSE));
    if (rc)
        return rc;
    real_part<<<grid_for(O * H * c), THREADS, 0, s>>>(cols, out, O * H * c,
                                                      (float)(1.0 / sqrt((double)H)));
    return cuda_code(cudaGetLastError());
}

static int invoke(void *fn, const pk_problem_call *c) {
    if (!fn || c->n_args != 2 || c->n_dims < 4)
        return -1;
    return reinterpret_cast<entry_fn>(fn)(
        c->ctx, static_cast<const float *>(c->args[0]), static_cast<float *>(c->args[1]),
        (size_t)c->dims[0], (size_t)c->dims[1], (size_t)c->dims[2], (size_t)c->dims[3]);
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, invoke, NULL, NULL, fini, NULL};
    return &module;
}
