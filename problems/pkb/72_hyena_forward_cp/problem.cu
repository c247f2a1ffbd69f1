// pkb/72_hyena_forward_cp (ParallelKernelBench problem 72): the long-convolution core of a Hyena
// operator under zigzag context parallelism. The sequence (Sf = W S positions) is 2W chunks of
// S/2; rank r holds chunk r and chunk 2W-1-r of x1, x2 and v (B x C x S each, bf16) and every
// rank holds the whole filter h (G x Lf, bf16; channel c uses row c / D) and bias (C). Rank r
// owns channels [r Cl, (r+1) Cl), Cl = C / W; for each of them, over the whole sequence in
// natural order,
//   u = bf16(x2 * v),  z1 = bf16(causal_conv(u, h_c)[t] + u[t] bias[c]),  z = bf16(x1 * z1)
// (the convolution y[t] = sum_{s <= t, s < Lf} h_c[s] u[t - s] in fp32, through FFTs of size
// 2 Sf, PKB's fftconv), and every rank returns out (B x S x C, bf16): z at its own two chunks'
// positions for every channel, sequence-major. PKB: all_to_all_single from a sequence split to a
// channel split (x1, x2, v), the inverse zigzag permutation, torch.fft.rfft / irfft, the zigzag
// permutation, all_to_all_single back, transpose(1, 2).
#include "pk_problem_module.h"

#include <cuda_bf16.h>
#include <cufft.h>

typedef __nv_bfloat16 bf16;

typedef int (*entry_fn)(const pk_ctx *, const bf16 *, const bf16 *, const bf16 *, const bf16 *,
                        const bf16 *, bf16 *, size_t, size_t, size_t, size_t, size_t, size_t);

static int cuda_code(cudaError_t e) {
    return e == cudaSuccess ? 0 : 2000 + (int)e;
}

static int nccl_code(ncclResult_t r) {
    return r == ncclSuccess ? 0 : 1000 + (int)r;
}

static int fft_code(cufftResult r) {
    return r == CUFFT_SUCCESS ? 0 : 4000 + (int)r;
}

// The reference's buffers, made in the first reference call (init() does not know the dims), a
// correctness trial, never a timed call. The all-to-all buffers are ncclMemAlloc'ed and
// registered as one NCCL window (NCCL 2.28 can hang between registered and plain memory,
// docs/problems.md, known issues; the registration is collective: every rank makes it in the
// same call): send_in / recv_in [peer][x1, x2, v][B][Cl][S], send_out / recv_out
// [peer][B][Cl][S]. In plain memory: x1 in natural order [B][Cl][Sf], the FFT inputs u [B Cl][n]
// and h [Cl][n] (fp32, zero-padded to n = 2 Sf), their spectra [.][n/2 + 1] and the inverse
// transform y [B Cl][n]. cuFFT plans for n with batches B Cl and Cl.
static struct {
    bf16 *comm_buf;
    size_t comm_bytes;
    ncclWindow_t win;
    bf16 *x1full;
    float *u, *h, *y;
    cufftComplex *uf, *hf;
    size_t x1_bytes, u_bytes, y_bytes, h_bytes, uf_bytes, hf_bytes;
    cufftHandle plan_u, plan_h, plan_y;
    long long plan_n, plan_batch;
} g_ref;

static int plain_buffer(void **p, size_t *have, size_t bytes) {
    if (*have >= bytes)
        return 0;
    cudaFree(*p);
    *p = NULL;
    *have = 0;
    int rc = cuda_code(cudaMalloc(p, bytes));
    if (!rc)
        *have = bytes;
    return rc;
}

static void destroy_plans(void) {
    if (g_ref.plan_n) {
        cufftDestroy(g_ref.plan_u);
        cufftDestroy(g_ref.plan_h);
        cufftDestroy(g_ref.plan_y);
    }
    g_ref.plan_n = g_ref.plan_batch = 0;
}

static int make_plans(long long n, long long batch, long long channels) {
    if (g_ref.plan_n == n && g_ref.plan_batch == batch)
        return 0;
    destroy_plans();
    int nn = (int)n;
    int rc = fft_code(cufftPlanMany(&g_ref.plan_u, 1, &nn, NULL, 1, nn, NULL, 1, nn / 2 + 1,
                                    CUFFT_R2C, (int)batch));
    if (!rc)
        rc = fft_code(cufftPlanMany(&g_ref.plan_h, 1, &nn, NULL, 1, nn, NULL, 1, nn / 2 + 1,
                                    CUFFT_R2C, (int)channels));
    if (!rc)
        rc = fft_code(cufftPlanMany(&g_ref.plan_y, 1, &nn, NULL, 1, nn / 2 + 1, NULL, 1, nn,
                                    CUFFT_C2R, (int)batch));
    if (!rc) {
        g_ref.plan_n = n;
        g_ref.plan_batch = batch;
    }
    return rc;
}

static int ref_buffers(const pk_ctx *ctx, long long B, long long C, long long S) {
    const int W = ctx->world_size;
    const long long Cl = C / W, Sf = W * S, n = 2 * Sf, nc = n / 2 + 1;
    const size_t comm = 8 * (size_t)(B * C * S) * sizeof(bf16);
    if (g_ref.comm_bytes < comm) {
        if (g_ref.comm_buf) {
            ncclCommWindowDeregister(ctx->comm, g_ref.win);
            ncclMemFree(g_ref.comm_buf);
            g_ref.comm_buf = NULL;
            g_ref.comm_bytes = 0;
        }
        int rc = nccl_code(ncclMemAlloc((void **)&g_ref.comm_buf, comm));
        if (!rc)
            rc = nccl_code(ncclCommWindowRegister(ctx->comm, g_ref.comm_buf, comm, &g_ref.win,
                                                  NCCL_WIN_COLL_SYMMETRIC));
        if (rc)
            return rc;
        g_ref.comm_bytes = comm;
    }
    int rc = plain_buffer((void **)&g_ref.x1full, &g_ref.x1_bytes, B * Cl * Sf * sizeof(bf16));
    if (!rc)
        rc = plain_buffer((void **)&g_ref.u, &g_ref.u_bytes, B * Cl * n * sizeof(float));
    if (!rc)
        rc = plain_buffer((void **)&g_ref.y, &g_ref.y_bytes, B * Cl * n * sizeof(float));
    if (!rc)
        rc = plain_buffer((void **)&g_ref.h, &g_ref.h_bytes, Cl * n * sizeof(float));
    if (!rc)
        rc = plain_buffer((void **)&g_ref.uf, &g_ref.uf_bytes, B * Cl * nc * sizeof *g_ref.uf);
    if (!rc)
        rc = plain_buffer((void **)&g_ref.hf, &g_ref.hf_bytes, Cl * nc * sizeof *g_ref.uf);
    return rc ? rc : make_plans(n, B * Cl, Cl);
}

static void fini(const pk_ctx *ctx) {
    if (g_ref.comm_buf) {
        ncclCommWindowDeregister(ctx->comm, g_ref.win);
        ncclMemFree(g_ref.comm_buf);
    }
    destroy_plans();
    cudaFree(g_ref.x1full);
    cudaFree(g_ref.u);
    cudaFree(g_ref.y);
    cudaFree(g_ref.h);
    cudaFree(g_ref.uf);
    cudaFree(g_ref.hf);
    g_ref = {};
}

// send_in[j][m][b][cl][t] = X_m[b][j Cl + cl][t]: channel slice j of x1, x2, v goes to rank j.
__global__ void pack_in(const bf16 *x1, const bf16 *x2, const bf16 *v, bf16 *send, long long B,
                        long long C, long long Cl, long long S) {
    const long long per = 3 * B * Cl * S, n = (C / Cl) * per;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        const long long j = i / per, m = i % per / (B * Cl * S), b = i % (B * Cl * S) / (Cl * S);
        const long long cl = i % (Cl * S) / S, t = i % S;
        const bf16 *x = m == 0 ? x1 : m == 1 ? x2 : v;
        send[i] = x[(b * C + j * Cl + cl) * S + t];
    }
}

// Global position g (natural order) -> the rank q holding it and its local position t: chunk
// k = g / (S/2) is rank k's chunk a (k < W) or rank 2W-1-k's chunk b.
__device__ __forceinline__ void zigzag_owner(long long g, long long S, int W, int *q,
                                             long long *t) {
    const long long half = S / 2, k = g / half, off = g % half;
    *q = k < W ? (int)k : (int)(2 * W - 1 - k);
    *t = k < W ? off : half + off;
}

// From recv_in (PKB's _a2a_split_to_full and the inverse zigzag): x1 in natural order, and the
// FFT input u = bf16(x2 v) as fp32, zero from Sf to n.
__global__ void unpack_in(const bf16 *recv, bf16 *x1full, float *u, long long B, long long Cl,
                          long long S, int W) {
    const long long Sf = W * S, n = 2 * Sf, total = B * Cl * n;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const long long row = i / n, g = i % n; // row = b Cl + cl
        if (g >= Sf) {
            u[i] = 0.f;
            continue;
        }
        int q;
        long long t;
        zigzag_owner(g, S, W, &q, &t);
        const bf16 *src = recv + (long long)q * 3 * B * Cl * S + row * S + t;
        x1full[row * Sf + g] = src[0];
        const bf16 uv = __hmul(src[B * Cl * S], src[2 * B * Cl * S]); // bf16(x2 v)
        u[i] = __bfloat162float(uv);
    }
}

// hb[cl][s] = h[(me Gl + cl / D)][s] for s < Lf, zero to n (PKB's h_local.repeat_interleave(D)).
__global__ void pack_filter(const bf16 *h, float *hb, long long Cl, long long Lf, long long D,
                            long long n, long long first_group) {
    const long long total = Cl * n;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const long long cl = i / n, s = i % n;
        hb[i] = s < Lf ? __bfloat162float(h[(first_group + cl / D) * Lf + s]) : 0.f;
    }
}

// uf[b Cl + cl][f] *= hf[cl][f] / n (PKB: rfft(kernel) / fft_size, irfft(norm="forward")).
__global__ void spectral_product(cufftComplex *uf, const cufftComplex *hf, long long rows,
                                 long long Cl, long long nc, float scale) {
    const long long total = rows * nc;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const cufftComplex a = uf[i], b = hf[(i / nc % Cl) * nc + i % nc];
        uf[i] = make_float2((a.x * b.x - a.y * b.y) * scale, (a.x * b.y + a.y * b.x) * scale);
    }
}

// z = bf16(x1 bf16(y + u bias)) in the zigzag order of _a2a_full_to_split:
// send_out[j][b][cl][tl], position g going to the rank j that holds it.
__global__ void epilogue(const float *y, const float *u, const bf16 *x1full, const bf16 *bias,
                         bf16 *send, long long B, long long Cl, long long S, int W,
                         long long first_channel) {
    const long long Sf = W * S, n = 2 * Sf, total = B * Cl * Sf;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const long long row = i / Sf, g = i % Sf, cl = row % Cl;
        const float bc = __bfloat162float(bias[first_channel + cl]);
        const bf16 z1 = __float2bfloat16(y[row * n + g] + u[row * n + g] * bc);
        const bf16 z = __hmul(x1full[i], z1);
        int j;
        long long tl;
        zigzag_owner(g, S, W, &j, &tl);
        send[(long long)j * B * Cl * S + row * S + tl] = z;
    }
}

// out[b][tl][q Cl + cl] = recv_out[q][b][cl][tl] (PKB's transpose(1, 2).contiguous()), through
// 32 x 32 tiles in shared memory: reads along tl, writes along c.
__global__ void transpose_out(const bf16 *recv, bf16 *out, long long B, long long C, long long Cl,
                              long long S) {
    __shared__ bf16 tile[32][33];
    const long long tc = C / 32, tt = (S + 31) / 32, tiles = B * tc * tt;
    const int tx = threadIdx.x % 32, ty = threadIdx.x / 32; // 256 threads: 8 rows a pass
    for (long long job = blockIdx.x; job < tiles; job += gridDim.x) {
        const long long b = job / (tc * tt), c0 = job / tt % tc * 32, t0 = job % tt * 32;
        for (int r = ty; r < 32; r += 8) {
            const long long c = c0 + r, t = t0 + tx;
            if (t < S)
                tile[r][tx] = recv[((c / Cl * B + b) * Cl + c % Cl) * S + t];
        }
        __syncthreads();
        for (int r = ty; r < 32; r += 8) {
            const long long t = t0 + r, c = c0 + tx;
            if (t < S)
                out[(b * S + t) * C + c] = tile[tx][r];
        }
        __syncthreads();
    }
}

static unsigned grid_for(long long n) {
    const long long b = (n + 255) / 256;
    return (unsigned)(b < 8192 ? b : 8192);
}

// Baseline, PKB's steps, one after another: pack x1, x2, v by destination rank, grouped NCCL
// send/recv (PKB's three all_to_all_single, here one exchange of the three), unpack into
// natural order with u = bf16(x2 v) (PKB's inverse zigzag index_select and z = x2 * v), the
// filter rows of this rank's channels, cuFFT R2C of u and of h (size n = 2 Sf, fp32), the
// product of the spectra over n, cuFFT C2R (PKB's irfft, norm="forward"), the epilogue
// bf16(x1 bf16(y + u bias)) packed in zigzag order by destination, the exchange back, and the
// transpose to (B, S, C).
static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const int W = ctx->world_size, me = ctx->rank;
    const long long B = call->dims[0], C = call->dims[1], S = call->dims[2], Lf = call->dims[3];
    const long long D = call->dims[4], G = call->dims[5];
    const bf16 *x1 = static_cast<const bf16 *>(call->args[0]);
    const bf16 *x2 = static_cast<const bf16 *>(call->args[1]);
    const bf16 *v = static_cast<const bf16 *>(call->args[2]);
    const bf16 *h = static_cast<const bf16 *>(call->args[3]);
    const bf16 *bias = static_cast<const bf16 *>(call->args[4]);
    bf16 *out = static_cast<bf16 *>(call->args[5]);
    cudaStream_t s = ctx->stream;
    const long long Cl = C / W, Gl = G / W, Sf = W * S, n = 2 * Sf, nc = n / 2 + 1;
    int rc = ref_buffers(ctx, B, C, S);
    if (rc)
        return rc;
    const long long blk_in = 3 * B * Cl * S, blk_out = B * Cl * S;
    bf16 *send_in = g_ref.comm_buf, *recv_in = send_in + W * blk_in;
    bf16 *send_out = recv_in + W * blk_in, *recv_out = send_out + W * blk_out;
    pack_in<<<grid_for(W * blk_in), 256, 0, s>>>(x1, x2, v, send_in, B, C, Cl, S);
    rc = cuda_code(cudaGetLastError());
    if (!rc)
        rc = nccl_code(ncclGroupStart());
    for (int j = 0; j < W && !rc; j++) {
        rc = nccl_code(
            ncclSend(send_in + j * blk_in, (size_t)blk_in, ncclBfloat16, j, ctx->comm, s));
        if (!rc)
            rc = nccl_code(
                ncclRecv(recv_in + j * blk_in, (size_t)blk_in, ncclBfloat16, j, ctx->comm, s));
    }
    int end = nccl_code(ncclGroupEnd());
    if (rc || end)
        return rc ? rc : end;
    unpack_in<<<grid_for(B * Cl * n), 256, 0, s>>>(recv_in, g_ref.x1full, g_ref.u, B, Cl, S, W);
    pack_filter<<<grid_for(Cl * n), 256, 0, s>>>(h, g_ref.h, Cl, Lf, D, n, me * Gl);
    rc = cuda_code(cudaGetLastError());
    if (!rc)
        rc = fft_code(cufftSetStream(g_ref.plan_u, s));
    if (!rc)
        rc = fft_code(cufftSetStream(g_ref.plan_h, s));
    if (!rc)
        rc = fft_code(cufftSetStream(g_ref.plan_y, s));
    if (!rc)
        rc = fft_code(cufftExecR2C(g_ref.plan_u, g_ref.u, g_ref.uf));
    if (!rc)
        rc = fft_code(cufftExecR2C(g_ref.plan_h, g_ref.h, g_ref.hf));
    if (rc)
        return rc;
    spectral_product<<<grid_for(B * Cl * nc), 256, 0, s>>>(g_ref.uf, g_ref.hf, B * Cl, Cl, nc,
                                                           1.f / (float)n);
    rc = cuda_code(cudaGetLastError());
    if (!rc)
        rc = fft_code(cufftExecC2R(g_ref.plan_y, g_ref.uf, g_ref.y));
    if (rc)
        return rc;
    epilogue<<<grid_for(B * Cl * Sf), 256, 0, s>>>(g_ref.y, g_ref.u, g_ref.x1full, bias, send_out,
                                                   B, Cl, S, W, me * Cl);
    rc = cuda_code(cudaGetLastError());
    if (!rc)
        rc = nccl_code(ncclGroupStart());
    for (int j = 0; j < W && !rc; j++) {
        rc = nccl_code(
            ncclSend(send_out + j * blk_out, (size_t)blk_out, ncclBfloat16, j, ctx->comm, s));
        if (!rc)
            rc = nccl_code(
                ncclRecv(recv_out + j * blk_out, (size_t)blk_out, ncclBfloat16, j, ctx->comm, s));
    }
    end = nccl_code(ncclGroupEnd());
    if (rc || end)
        return rc ? rc : end;
    transpose_out<<<grid_for(B * C * S / 4), 256, 0, s>>>(recv_out, out, B, C, Cl, S);
    return cuda_code(cudaGetLastError());
}

static int invoke(void *fn, const pk_problem_call *c) {
    if (!fn || c->n_args != 6 || c->n_dims < 6)
        return -1;
    return reinterpret_cast<entry_fn>(fn)(
        c->ctx, static_cast<const bf16 *>(c->args[0]), static_cast<const bf16 *>(c->args[1]),
        static_cast<const bf16 *>(c->args[2]), static_cast<const bf16 *>(c->args[3]),
        static_cast<const bf16 *>(c->args[4]), static_cast<bf16 *>(c->args[5]), (size_t)c->dims[0],
        (size_t)c->dims[1], (size_t)c->dims[2], (size_t)c->dims[3], (size_t)c->dims[4],
        (size_t)c->dims[5]);
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, invoke, NULL, NULL, fini, NULL};
    return &module;
}
