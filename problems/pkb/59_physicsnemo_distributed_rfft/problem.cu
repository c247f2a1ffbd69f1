// pkb/59_physicsnemo_distributed_rfft (ParallelKernelBench problem 59): PhysicsNeMo's 2-D real
// FFT of a field whose last dimension is split across ranks. The global field is B x H x Wd
// (fp32); rank r holds its columns x_r = x[:, :, r Wl : (r+1) Wl] (Wl = Wd / W, row-major
// B x H x Wl) and returns rows [r Hl, (r+1) Hl) (Hl = H / W) of
//   rfft2(x, norm="ortho")  =  (fft along W of (fft along H of x))[:, :, :Wd/2 + 1]
// as complex64 (B x Hl x (Wd/2 + 1), interleaved re, im). PKB's steps, which the baseline
// follows: a complex FFT along H of the local columns, the all-to-all that splits H and
// concatenates W (problems/include/pk_fft_transpose.cuh), a complex FFT along W of the local
// rows, truncation to the Wd/2 + 1 non-negative frequencies. "ortho": each 1-D transform scaled
// by 1 / sqrt(n), after the transform (PyTorch's order).
#include "pk_fft_transpose.cuh"
#include "pk_problem_module.h"

#include <cufft.h>
#include <math.h>

typedef int (*entry_fn)(const pk_ctx *, const float *, float *, size_t, size_t, size_t);

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
// rank makes: window registration is collective) and remade if the dims change. The all-to-all's
// send and receive buffers are one registered window (NCCL 2.28 can hang between the windowed
// arena and plain memory: docs/problems.md, known issues); the field's two layouts in plain
// memory.
static struct {
    long long B, H, Wd;
    float2 *xa;       // B x H x Wl: the local columns, then their FFT along H
    float2 *xb;       // B x Hl x Wd: the local rows, then their FFT along W
    float2 *sendrecv; // 2 x B H Wl
    size_t sr_bytes;
    ncclWindow_t win;
    cufftHandle along_h, along_w;
    int plans;
} g_ref;

static void release(const pk_ctx *ctx) {
    if (g_ref.sendrecv) {
        ncclCommWindowDeregister(ctx->comm, g_ref.win);
        ncclMemFree(g_ref.sendrecv);
    }
    cudaFree(g_ref.xa);
    cudaFree(g_ref.xb);
    if (g_ref.plans) {
        cufftDestroy(g_ref.along_h);
        cufftDestroy(g_ref.along_w);
    }
    g_ref = {};
}

static void fini(const pk_ctx *ctx) {
    release(ctx);
}

static int ref_setup(const pk_ctx *ctx, long long B, long long H, long long Wd) {
    if (g_ref.plans && g_ref.B == B && g_ref.H == H && g_ref.Wd == Wd)
        return 0;
    int rc = cuda_code(cudaStreamSynchronize(ctx->stream));
    if (rc)
        return rc;
    release(ctx);
    const long long W = ctx->world_size, Wl = Wd / W, Hl = H / W, n = B * H * Wl;
    const size_t bytes = 2 * (size_t)n * sizeof(float2);
    rc = nccl_code(ncclMemAlloc((void **)&g_ref.sendrecv, bytes));
    if (!rc)
        rc = nccl_code(ncclCommWindowRegister(ctx->comm, g_ref.sendrecv, bytes, &g_ref.win,
                                              NCCL_WIN_COLL_SYMMETRIC));
    if (!rc)
        rc = cuda_code(cudaMalloc((void **)&g_ref.xa, (size_t)n * sizeof(float2)));
    if (!rc)
        rc = cuda_code(cudaMalloc((void **)&g_ref.xb, (size_t)(B * Hl * Wd) * sizeof(float2)));
    if (rc)
        return rc;
    g_ref.sr_bytes = bytes;
    // Along H: Wl transforms of length H per batch, stride Wl, one column apart; the B batches
    // are one plan's calls at offsets of H Wl (cuFFT's layout has one batch stride).
    int nh = (int)H, nw = (int)Wd, emb_h = (int)H, emb_w = (int)Wd;
    rc = fft_code(cufftPlanMany(&g_ref.along_h, 1, &nh, &emb_h, (int)Wl, 1, &emb_h, (int)Wl, 1,
                                CUFFT_C2C, (int)Wl));
    if (!rc) {
        rc = fft_code(cufftPlanMany(&g_ref.along_w, 1, &nw, &emb_w, 1, (int)Wd, &emb_w, 1, (int)Wd,
                                    CUFFT_C2C, (int)(B * Hl)));
        if (rc)
            cufftDestroy(g_ref.along_h);
    }
    if (rc)
        return rc;
    g_ref.plans = 1;
    g_ref.B = B;
    g_ref.H = H;
    g_ref.Wd = Wd;
    return 0;
}

// The real columns as complex (torch.fft.fft of a real tensor).
__global__ void to_complex(const float *x, float2 *c, long long n) {
    for (long long i = (long long)blockIdx.x * THREADS + threadIdx.x; i < n;
         i += (long long)gridDim.x * THREADS)
        c[i] = make_float2(x[i], 0.f);
}

// out[b][i][k] = xb[b][i][k] / sqrt(Wd) for k <= Wd/2 (the ortho scale, then the truncation).
__global__ void truncate_scale(const float2 *xb, float2 *out, long long rows, long long Wd,
                               float scale) {
    const long long half = Wd / 2 + 1;
    for (long long i = (long long)blockIdx.x * THREADS + threadIdx.x; i < rows * half;
         i += (long long)gridDim.x * THREADS) {
        const float2 v = xb[i / half * Wd + i % half];
        out[i] = make_float2(v.x * scale, v.y * scale);
    }
}

static unsigned grid_for(long long n) {
    const long long b = (n + THREADS - 1) / THREADS;
    return (unsigned)(b < 4 * 132 * 8 ? b : 4 * 132 * 8);
}

// Baseline, PKB's steps one after another: the columns to complex; cuFFT along H (B calls of one
// strided plan); the ortho scale folded into the pack of the all-to-all's send buffer (PyTorch
// scales in a pass of its own); ncclSend / ncclRecv to and from every rank in one group; the
// unpack into B x Hl x Wd rows; cuFFT along W; the scale and the truncation in one pass.
static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const long long B = call->dims[0], H = call->dims[1], Wd = call->dims[2];
    const int W = ctx->world_size;
    const long long Wl = Wd / W, Hl = H / W, n = B * H * Wl, chunk = n / W;
    const float *x = static_cast<const float *>(call->args[0]);
    float2 *out = static_cast<float2 *>(call->args[1]);
    cudaStream_t s = ctx->stream;
    int rc = ref_setup(ctx, B, H, Wd);
    if (!rc)
        rc = fft_code(cufftSetStream(g_ref.along_h, s));
    if (!rc)
        rc = fft_code(cufftSetStream(g_ref.along_w, s));
    if (rc)
        return rc;
    to_complex<<<grid_for(n), THREADS, 0, s>>>(x, g_ref.xa, n);
    for (long long b = 0; b < B && !rc; b++)
        rc = fft_code(cufftExecC2C(g_ref.along_h, (cufftComplex *)(g_ref.xa + b * H * Wl),
                                   (cufftComplex *)(g_ref.xa + b * H * Wl), CUFFT_FORWARD));
    if (rc)
        return rc;
    float2 *send = g_ref.sendrecv, *recv = g_ref.sendrecv + n;
    pk_xpose_pack<<<grid_for(n), THREADS, 0, s>>>(g_ref.xa, send, PK_XPOSE_ROWS, B, H, Wl, W,
                                                  (float)(1.0 / sqrt((double)H)));
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
    pk_xpose_unpack<<<grid_for(n), THREADS, 0, s>>>(recv, g_ref.xb, PK_XPOSE_ROWS, B, H, Wl, W);
    rc = fft_code(cufftExecC2C(g_ref.along_w, (cufftComplex *)g_ref.xb, (cufftComplex *)g_ref.xb,
                               CUFFT_FORWARD));
    if (rc)
        return rc;
    truncate_scale<<<grid_for(B * Hl * (Wd / 2 + 1)), THREADS, 0, s>>>(
        g_ref.xb, out, B * Hl, Wd, (float)(1.0 / sqrt((double)Wd)));
    return cuda_code(cudaGetLastError());
}

static int invoke(void *fn, const pk_problem_call *c) {
    if (!fn || c->n_args != 2 || c->n_dims < 3)
        return -1;
    return reinterpret_cast<entry_fn>(fn)(c->ctx, static_cast<const float *>(c->args[0]),
                                          static_cast<float *>(c->args[1]), (size_t)c->dims[0],
                                          (size_t)c->dims[1], (size_t)c->dims[2]);
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, invoke, NULL, NULL, fini, NULL};
    return &module;
}
