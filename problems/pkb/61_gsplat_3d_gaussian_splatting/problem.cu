// pkb/61_gsplat_3d_gaussian_splatting (ParallelKernelBench problem 61): gsplat's distributed
// projection step. Rank r holds n_r gaussians (a capacity of N; ragged, zero on some ranks) and
// C cameras. Every gaussian of every rank is projected into every camera of every rank (pinhole,
// PKB's _fully_fused_projection: covariance from quaternion and scale, the clamped Jacobian,
// eps2d = 0.3, det clamped at 1e-10, conics, radius = ceil(3.33 sqrt(cov2d_ii)), near 0.01, far
// 1e10, the inside test); the visible (gaussian, camera) pairs go to the rank owning the camera.
// Rank d's output: for each source rank s in order, each of d's cameras c in order, each gaussian
// g < n_s of s in order, if visible: a row (camera id c, gaussian id g + sum_{j<d} n_j -- PKB's
// offset is the DESTINATION's, as gsplat's repeat_interleave(cnts) makes it --, radii, means2d,
// depth, conic, opacity, color). The order is fixed by the indices (PKB has no depth sort), so
// the output is unique up to rounding; generate() keeps every discrete decision (the radius ceil,
// the inside and depth tests) at least 1e-3 (+ 1e-4 of the value) from its boundary in fp64, so
// fp32 codes agree on it; the generic checkers suffice (ids, radii and total exact).
#include "pk_problem_module.h"
#include "pk_splitmix.h"

#include <cub/cub.cuh>
#include <cuda_bf16.h>

#include <math.h>
#include <stdint.h>
#include <vector>

typedef __nv_bfloat16 bf16;

typedef int (*entry_fn)(const pk_ctx *, const bf16 *, const bf16 *, const bf16 *, const bf16 *,
                        const bf16 *, const int64_t *, const bf16 *, const bf16 *, int32_t *,
                        int32_t *, float *, int64_t *, size_t, size_t, size_t, size_t);

#define KEY_POST_TIMING (1 << 20)
#define KEY_TIMED_BASE (1 << 21)
#define MAX_CAMS 64 // W * C cameras a generator thread checks against (constraint)

static int cuda_code(cudaError_t e) {
    return e == cudaSuccess ? 0 : 2000 + (int)e;
}

static int nccl_code(ncclResult_t r) {
    return r == ncclSuccess ? 0 : 1000 + (int)r;
}

static unsigned grid_for(long long n) {
    const long long b = (n + 255) / 256;
    return (unsigned)(b < 1 ? 1 : b < 8192 ? b : 8192);
}

// One output row as the exchange carries it (56 bytes).
struct row_t {
    int32_t cam, gid, rx, ry;
    float f[10]; // means2d x, y, depth, conic a, b, c, opacity, color r, g, b
};

// PKB's projection of one gaussian into one camera (V: 4x4 row-major world-to-camera, K: 3x3),
// in T arithmetic. Returns whether the pair is kept (depth in (near, far), inside, radii > 0);
// margin: the smallest distance of a discrete decision from its boundary (generate() only).
template <typename T> struct proj_t {
    T m2x, m2y, depth, ca, cb, cc, margin;
    int rx, ry;
};

template <typename T>
__host__ __device__ inline bool gs_project(const T m[3], const T q[4], const T s[3], const T *V,
                                           const T *K, T width, T height, proj_t<T> &o) {
    const T eps2d = (T)0.3, near_plane = (T)0.01, far_plane = (T)1e10;
    T nrm = sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]);
    nrm = nrm > (T)1e-12 ? nrm : (T)1e-12; // F.normalize
    const T w = q[0] / nrm, x = q[1] / nrm, y = q[2] / nrm, z = q[3] / nrm;
    const T R[3][3] = {{1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)},
                       {2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)},
                       {2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)}};
    T M[3][3], cov[3][3], A[3][3], cc[3][3], mc[3];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            M[i][j] = R[i][j] * s[j];
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 3; k++)
            cov[i][k] = M[i][0] * M[k][0] + M[i][1] * M[k][1] + M[i][2] * M[k][2];
    for (int i = 0; i < 3; i++) // _world_to_cam
        mc[i] = V[4 * i] * m[0] + V[4 * i + 1] * m[1] + V[4 * i + 2] * m[2] + V[4 * i + 3];
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 3; k++)
            A[i][k] = V[4 * i] * cov[0][k] + V[4 * i + 1] * cov[1][k] + V[4 * i + 2] * cov[2][k];
    for (int i = 0; i < 3; i++)
        for (int l = 0; l < 3; l++)
            cc[i][l] = A[i][0] * V[4 * l] + A[i][1] * V[4 * l + 1] + A[i][2] * V[4 * l + 2];
    const T tx = mc[0], ty = mc[1], tz = mc[2];
    o.depth = tz;
    T margin = tz - near_plane;
    margin = margin < 0 ? -margin : margin;
    if (!(tz > near_plane && tz < far_plane)) { // radius 0 whatever the rest gives
        o.margin = margin;
        return false;
    }
    const T fx = K[0], fy = K[4], cx = K[2], cy = K[5];
    const T tan_fovx = (T)0.5 * width / fx, tan_fovy = (T)0.5 * height / fy;
    const T lxp = (width - cx) / fx + (T)0.3 * tan_fovx, lxn = cx / fx + (T)0.3 * tan_fovx;
    const T lyp = (height - cy) / fy + (T)0.3 * tan_fovy, lyn = cy / fy + (T)0.3 * tan_fovy;
    T ux = tx / tz, uy = ty / tz;
    ux = ux < -lxn ? -lxn : ux > lxp ? lxp : ux;
    uy = uy < -lyn ? -lyn : uy > lyp ? lyp : uy;
    const T tz2 = tz * tz, txc = tz * ux, tyc = tz * uy;
    const T J[2][3] = {{fx / tz, 0, -fx * txc / tz2}, {0, fy / tz, -fy * tyc / tz2}};
    T B[2][3], c2[2][2];
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 3; k++)
            B[i][k] = J[i][0] * cc[0][k] + J[i][1] * cc[1][k] + J[i][2] * cc[2][k];
    for (int i = 0; i < 2; i++)
        for (int l = 0; l < 2; l++)
            c2[i][l] = B[i][0] * J[l][0] + B[i][1] * J[l][1] + B[i][2] * J[l][2];
    o.m2x = (K[0] * tx + K[1] * ty + K[2] * tz) / tz;
    o.m2y = (K[3] * tx + K[4] * ty + K[5] * tz) / tz;
    const T a = c2[0][0] + eps2d, b = c2[0][1], c = c2[1][0], d = c2[1][1] + eps2d;
    T det = a * d - b * c;
    det = det > (T)1e-10 ? det : (T)1e-10;
    o.ca = d / det;
    o.cb = -(b + c) / (T)2 / det;
    o.cc = a / det;
    const T vx = (T)3.33 * sqrt(a), vy = (T)3.33 * sqrt(d);
    o.rx = (int)ceil(vx);
    o.ry = (int)ceil(vy);
    const auto gap = [](T v, T bound) {
        const T g = v - bound, tol = (T)1e-4 * (v < 0 ? -v : v);
        return (g < 0 ? -g : g) - tol;
    };
    // What fp32 rounding in any order can move each decided value by, bounded by the magnitude
    // of its terms (16 ulp of fp32 ~ 1e-6 relative): the radii through Sigma2's diagonal, a sum
    // of terms up to (|J_i0| + |J_i2|)^2 max(s)^2 that may cancel (thin gaussians), the means
    // through K's products over tz.
    const T sm = s[0] > s[1] ? (s[0] > s[2] ? s[0] : s[2]) : (s[1] > s[2] ? s[1] : s[2]);
    const T jx = (J[0][0] < 0 ? -J[0][0] : J[0][0]) + (J[0][2] < 0 ? -J[0][2] : J[0][2]);
    const T jy = (J[1][1] < 0 ? -J[1][1] : J[1][1]) + (J[1][2] < 0 ? -J[1][2] : J[1][2]);
    const T ex = (T)1e-6 * jx * jx * sm * sm * (T)3.33 / ((T)2 * sqrt(a));
    const T ey = (T)1e-6 * jy * jy * sm * sm * (T)3.33 / ((T)2 * sqrt(d));
    const auto mag = [](T v) { return v < 0 ? -v : v; };
    const T em = (T)1e-6 *
                 (mag(K[0] * tx) + mag(K[1] * ty) + mag(K[2] * tz) + mag(K[3] * tx) +
                  mag(K[4] * ty) + mag(K[5] * tz)) /
                 mag(tz);
    const T e[6] = {gap(vx, floor(vx + (T)0.5)) - ex, gap(vy, floor(vy + (T)0.5)) - ey,
                    gap(o.m2x, (T)-o.rx) - em,        gap(o.m2x, width + o.rx) - em,
                    gap(o.m2y, (T)-o.ry) - em,        gap(o.m2y, height + o.ry) - em};
    for (int i = 0; i < 6; i++)
        margin = e[i] < margin ? e[i] : margin;
    o.margin = margin;
    const bool inside =
        o.m2x + o.rx > 0 && o.m2x - o.rx < width && o.m2y + o.ry > 0 && o.m2y - o.ry < height;
    return inside && o.rx > 0 && o.ry > 0;
}

// ---- the reference ------------------------------------------------------------------------

static struct {
    uint8_t *buf;
    size_t bytes;
    ncclWindow_t win;
    void *cub_tmp;
    size_t cub_bytes;
    int64_t *host;
} g_ref;

static void fini(const pk_ctx *ctx) {
    if (g_ref.buf) {
        ncclCommWindowDeregister(ctx->comm, g_ref.win);
        ncclMemFree(g_ref.buf);
    }
    cudaFree(g_ref.cub_tmp);
    cudaFreeHost(g_ref.host);
    g_ref = {};
}

static size_t align256(size_t b) {
    return (b + 255) / 256 * 256;
}

struct layout {
    int64_t *sizes, *send_counts, *recv_counts;
    bf16 *views, *ks;
    int32_t *flags, *pos;
    row_t *stage, *send, *recv;
};

static layout carve(uint8_t *base, int W, long long C, long long N, size_t *total) {
    layout l;
    size_t off = 0;
    const size_t rows = (size_t)W * C * N;
    const auto take = [&](size_t bytes) {
        uint8_t *p = base ? base + off : NULL;
        off += align256(bytes);
        return p;
    };
    l.sizes = (int64_t *)take(8 * (size_t)W);
    l.send_counts = (int64_t *)take(8 * (size_t)W);
    l.recv_counts = (int64_t *)take(8 * (size_t)W);
    l.views = (bf16 *)take(2 * 16 * (size_t)W * C);
    l.ks = (bf16 *)take(2 * 9 * (size_t)W * C);
    l.flags = (int32_t *)take(4 * (rows + 1));
    l.pos = (int32_t *)take(4 * (rows + 1));
    l.stage = (row_t *)take(sizeof(row_t) * rows);
    l.send = (row_t *)take(sizeof(row_t) * rows);
    l.recv = (row_t *)take(sizeof(row_t) * rows);
    *total = off;
    return l;
}

static int ref_buffers(const pk_ctx *ctx, long long C, long long N) {
    const int W = ctx->world_size;
    size_t bytes = 0;
    carve(NULL, W, C, N, &bytes);
    if (g_ref.bytes < bytes) {
        if (g_ref.buf) {
            ncclCommWindowDeregister(ctx->comm, g_ref.win);
            ncclMemFree(g_ref.buf);
            g_ref.buf = NULL;
            g_ref.bytes = 0;
        }
        int rc = nccl_code(ncclMemAlloc((void **)&g_ref.buf, bytes));
        if (!rc)
            rc = nccl_code(ncclCommWindowRegister(ctx->comm, g_ref.buf, bytes, &g_ref.win,
                                                  NCCL_WIN_COLL_SYMMETRIC));
        if (rc)
            return rc;
        g_ref.bytes = bytes;
    }
    size_t need = 0;
    int rc = cuda_code(cub::DeviceScan::ExclusiveSum(NULL, need, (int32_t *)NULL, (int32_t *)NULL,
                                                     (int)(W * C * N + 1)));
    if (!rc && g_ref.cub_bytes < need) {
        cudaFree(g_ref.cub_tmp);
        g_ref.cub_bytes = 0;
        rc = cuda_code(cudaMalloc(&g_ref.cub_tmp, need));
        if (!rc)
            g_ref.cub_bytes = need;
    }
    if (!rc && !g_ref.host)
        rc = cuda_code(cudaMallocHost((void **)&g_ref.host, 8 * 4 * 64));
    return rc;
}

__global__ void clamp_n(const int64_t *n_in, int64_t *size_out, long long N) {
    const long long n = *n_in;
    *size_out = n < 0 ? 0 : n > N ? N : n;
}

// _fully_fused_projection of the local gaussians into every camera of every rank (camera-major,
// as torch.where packs them), fp32; flags[t] = kept.
__global__ void project_all(const bf16 *means, const bf16 *quats, const bf16 *scales,
                            const bf16 *opac, const bf16 *colors, long long n, const bf16 *views,
                            const bf16 *ks, long long WC, long long N, float width, float height,
                            row_t *stage, int32_t *flags) {
    const long long rows = WC * N;
    for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t <= rows;
         t += (long long)gridDim.x * blockDim.x) {
        if (t == rows) {
            flags[t] = 0; // the scan's last element: its exclusive sum is the total
            continue;
        }
        const long long c = t / N, g = t % N;
        int keep = 0;
        if (g < n) {
            float m[3], q[4], s[3], V[16], K[9];
            for (int i = 0; i < 3; i++) {
                m[i] = __bfloat162float(means[3 * g + i]);
                s[i] = __bfloat162float(scales[3 * g + i]);
            }
            for (int i = 0; i < 4; i++)
                q[i] = __bfloat162float(quats[4 * g + i]);
            for (int i = 0; i < 16; i++)
                V[i] = __bfloat162float(views[16 * c + i]);
            for (int i = 0; i < 9; i++)
                K[i] = __bfloat162float(ks[9 * c + i]);
            proj_t<float> p;
            keep = gs_project<float>(m, q, s, V, K, width, height, p);
            if (keep) {
                row_t r;
                r.cam = (int32_t)c;
                r.gid = (int32_t)g;
                r.rx = p.rx;
                r.ry = p.ry;
                r.f[0] = p.m2x;
                r.f[1] = p.m2y;
                r.f[2] = p.depth;
                r.f[3] = p.ca;
                r.f[4] = p.cb;
                r.f[5] = p.cc;
                r.f[6] = __bfloat162float(opac[g]);
                for (int i = 0; i < 3; i++)
                    r.f[7 + i] = __bfloat162float(colors[3 * g + i]);
                stage[t] = r;
            }
        }
        flags[t] = keep;
    }
}

// Packing (torch.where order) with PKB's id offsets: the camera id made local to the rank that
// owns it, the gaussian id plus the offset of that (destination) rank's shard.
__global__ void pack_rows(const row_t *stage, const int32_t *flags, const int32_t *pos,
                          const int64_t *sizes, long long rows, long long CN, long long C,
                          row_t *send) {
    for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < rows;
         t += (long long)gridDim.x * blockDim.x) {
        if (!flags[t])
            continue;
        row_t r = stage[t];
        const int d = (int)(t / CN);
        long long off = 0;
        for (int j = 0; j < d; j++)
            off += sizes[j];
        r.cam -= (int32_t)(d * C);
        r.gid += (int32_t)off;
        send[pos[t]] = r;
    }
}

__global__ void dest_counts(const int32_t *pos, int W, long long CN, int64_t *counts) {
    const int d = threadIdx.x;
    if (d < W)
        counts[d] = pos[(d + 1) * CN] - pos[d * CN];
}

// The received rows into ids / radii / proj, the capacity's tail zeroed; total.
__global__ void unpack(const row_t *recv, long long m, long long R, int32_t *ids, int32_t *radii,
                       float *proj, int64_t *total) {
    if (blockIdx.x == 0 && threadIdx.x == 0)
        *total = m;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < R;
         i += (long long)gridDim.x * blockDim.x) {
        if (i < m) {
            const row_t r = recv[i];
            ids[2 * i] = r.cam;
            ids[2 * i + 1] = r.gid;
            radii[2 * i] = r.rx;
            radii[2 * i + 1] = r.ry;
            for (int k = 0; k < 10; k++)
                proj[10 * i + k] = r.f[k];
        } else {
            ids[2 * i] = ids[2 * i + 1] = 0;
            radii[2 * i] = radii[2 * i + 1] = 0;
            for (int k = 0; k < 10; k++)
                proj[10 * i + k] = 0.f;
        }
    }
}

static int sync_host(cudaStream_t s, void *dst, const void *src, size_t bytes) {
    int rc = cuda_code(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s));
    return rc ? rc : cuda_code(cudaStreamSynchronize(s));
}

// Baseline, PKB's steps one after another with its host synchronizations: the shard sizes all-
// gathered (PKB's _all_gather_int32, .tolist()), the cameras all-gathered, the projection of the
// local gaussians into all W C cameras (one fp32 kernel: PKB's torch ops fused per pair, no
// strawman), the packing by a CUB scan (torch.where), the counts per destination to the host,
// the counts all-to-all (host), the rows all-to-all (grouped NCCL send/recv, PKB's all_to_all of
// the concatenated fields), and the rows unpacked into the outputs.
static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const int W = ctx->world_size, me = ctx->rank;
    const long long N = call->dims[0], C = call->dims[1];
    const float width = (float)call->dims[2], height = (float)call->dims[3];
    const bf16 *means = static_cast<const bf16 *>(call->args[0]);
    const bf16 *quats = static_cast<const bf16 *>(call->args[1]);
    const bf16 *scales = static_cast<const bf16 *>(call->args[2]);
    const bf16 *opac = static_cast<const bf16 *>(call->args[3]);
    const bf16 *colors = static_cast<const bf16 *>(call->args[4]);
    const int64_t *n_in = static_cast<const int64_t *>(call->args[5]);
    const bf16 *views = static_cast<const bf16 *>(call->args[6]);
    const bf16 *ks = static_cast<const bf16 *>(call->args[7]);
    int32_t *ids = static_cast<int32_t *>(call->args[8]);
    int32_t *radii = static_cast<int32_t *>(call->args[9]);
    float *proj = static_cast<float *>(call->args[10]);
    int64_t *total = static_cast<int64_t *>(call->args[11]);
    cudaStream_t s = ctx->stream;
    int rc = ref_buffers(ctx, C, N);
    if (rc)
        return rc;
    size_t bytes = 0;
    const layout l = carve(g_ref.buf, W, C, N, &bytes);
    int64_t *h = g_ref.host;
    const long long rows = (long long)W * C * N, CN = C * N;
    clamp_n<<<1, 1, 0, s>>>(n_in, l.sizes + me, N);
    rc = cuda_code(cudaGetLastError());
    if (!rc)
        rc = nccl_code(ncclAllGather(l.sizes + me, l.sizes, 1, ncclInt64, ctx->comm, s));
    if (!rc)
        rc = sync_host(s, h, l.sizes, 8 * (size_t)W);
    // The cameras all-gathered (staged into this rank's slot of the reference's window first:
    // NCCL 2.28 can hang between registered and plain memory, so both ends are in one window).
    if (!rc)
        rc = cuda_code(cudaMemcpyAsync(l.views + 16 * C * me, views, 32 * (size_t)C,
                                       cudaMemcpyDeviceToDevice, s));
    if (!rc)
        rc = cuda_code(
            cudaMemcpyAsync(l.ks + 9 * C * me, ks, 18 * (size_t)C, cudaMemcpyDeviceToDevice, s));
    if (!rc)
        rc = nccl_code(
            ncclAllGather(l.views + 16 * C * me, l.views, 32 * (size_t)C, ncclUint8, ctx->comm, s));
    if (!rc)
        rc = nccl_code(
            ncclAllGather(l.ks + 9 * C * me, l.ks, 18 * (size_t)C, ncclUint8, ctx->comm, s));
    if (rc)
        return rc;
    const long long n = h[me];
    project_all<<<grid_for(rows + 1), 256, 0, s>>>(means, quats, scales, opac, colors, n, l.views,
                                                   l.ks, (long long)W * C, N, width, height,
                                                   l.stage, l.flags);
    rc = cuda_code(cudaGetLastError());
    size_t tb = g_ref.cub_bytes;
    if (!rc)
        rc = cuda_code(
            cub::DeviceScan::ExclusiveSum(g_ref.cub_tmp, tb, l.flags, l.pos, (int)(rows + 1), s));
    if (!rc) {
        pack_rows<<<grid_for(rows), 256, 0, s>>>(l.stage, l.flags, l.pos, l.sizes, rows, CN, C,
                                                 l.send);
        dest_counts<<<1, 64, 0, s>>>(l.pos, W, CN, l.send_counts);
        rc = cuda_code(cudaGetLastError());
    }
    if (!rc) // PKB's torch.stack(cnts) / .item(): the split sizes on the host
        rc = sync_host(s, h, l.send_counts, 8 * (size_t)W);
    if (rc)
        return rc;
    std::vector<long long> send_off(W + 1, 0), recv_off(W + 1, 0);
    for (int j = 0; j < W; j++)
        send_off[j + 1] = send_off[j] + h[j];
    rc = nccl_code(ncclGroupStart()); // _all_to_all_int32
    for (int j = 0; j < W && !rc; j++) {
        rc = nccl_code(ncclSend(l.send_counts + j, 1, ncclInt64, j, ctx->comm, s));
        if (!rc)
            rc = nccl_code(ncclRecv(l.recv_counts + j, 1, ncclInt64, j, ctx->comm, s));
    }
    int end = nccl_code(ncclGroupEnd());
    if (!rc && !end)
        rc = sync_host(s, h, l.recv_counts, 8 * (size_t)W);
    if (rc || end)
        return rc ? rc : end;
    for (int j = 0; j < W; j++)
        recv_off[j + 1] = recv_off[j] + h[j];
    rc = nccl_code(ncclGroupStart()); // _all_to_all_tensor_list (the rows as bytes)
    for (int j = 0; j < W && !rc; j++) {
        const long long sc = send_off[j + 1] - send_off[j], rcnt = recv_off[j + 1] - recv_off[j];
        if (sc > 0)
            rc = nccl_code(ncclSend(l.send + send_off[j], sizeof(row_t) * (size_t)sc, ncclUint8, j,
                                    ctx->comm, s));
        if (!rc && rcnt > 0)
            rc = nccl_code(ncclRecv(l.recv + recv_off[j], sizeof(row_t) * (size_t)rcnt, ncclUint8,
                                    j, ctx->comm, s));
    }
    end = nccl_code(ncclGroupEnd());
    if (rc || end)
        return rc ? rc : end;
    unpack<<<grid_for(rows), 256, 0, s>>>(l.recv, recv_off[W], rows, ids, radii, proj, total);
    return cuda_code(cudaGetLastError());
}

// ---- generate(): shard lengths, cameras and gaussians from (seed, key) ---------------------

// Every rank's shard length for call `key` (the same on every rank); returns the trial class.
// Classes (key % 5): 0 PKB's (every rank N, identity cameras: every gaussian visible in every
// camera); 1 lengths 0..N, translated cameras, a fifth of the gaussians behind the camera and a
// fifth far off to the side (straddling the image edges); 2 PKB's trial shape with the odd
// ranks empty, translated cameras; 3 one rank N, the others 0..N/16, every depth equal (z = 3),
// clustered means, large scales (a pixel covered by many gaussians); 4 lengths 0..N, half the
// gaussians around the near plane (z in [-0.5, 0.5]), rank 0's first camera turned around (it
// sees only what is behind the others). After timing: as 1. Timed calls: as 0.
static int shard_plan(uint64_t seed, int key, int world, long long N, long long *len) {
    const uint64_t k = pk_splitmix64(seed ^ pk_splitmix64(0x61ull << 40 ^ (uint64_t)(unsigned)key));
    const auto draw = [&](int j, long long lo, long long hi) {
        return lo + (long long)(pk_splitmix64(k + (uint64_t)j) % (uint64_t)(hi - lo + 1));
    };
    const int cls = key >= KEY_TIMED_BASE ? 0 : key == KEY_POST_TIMING ? 1 : key % 5;
    for (int r = 0; r < world; r++) {
        if (cls == 0)
            len[r] = N;
        else if (cls == 2)
            len[r] = r % 2 ? 0 : N;
        else if (cls == 3)
            len[r] = draw(r, 0, N / 16);
        else
            len[r] = draw(r, 0, N);
    }
    if (cls == 3)
        len[draw(100, 0, world - 1)] = N;
    if (cls == 1 || cls == 4)
        len[draw(101, 0, world - 1)] = 0; // an empty rank
    return cls;
}

__host__ __device__ inline float bf16_round(float v) {
    return __bfloat162float(__float2bfloat16(v));
}

// Camera c of rank r: K as PKB's (focal 0.8 min(w, h), principal point at the centre); the view
// the identity (classes 0), or translated by multiples of 1/8 (bf16-exact), or turned around.
__host__ __device__ inline void camera_of(int cls, uint64_t ck, int r, int c, float width,
                                          float height, float V[16], float K[9]) {
    for (int i = 0; i < 16; i++)
        V[i] = (i % 5 == 0) ? 1.f : 0.f;
    const float f = bf16_round(0.8f * (width < height ? width : height));
    const float k9[9] = {f,   0.f, bf16_round(0.5f * width), 0.f, f, bf16_round(0.5f * height), 0.f,
                         0.f, 1.f};
    for (int i = 0; i < 9; i++)
        K[i] = k9[i];
    if (cls == 0)
        return;
    const uint64_t h = pk_splitmix64(ck ^ ((uint64_t)r << 32) ^ (uint64_t)c);
    V[3] = (float)((long long)(h % 9) - 4) * 0.125f;
    V[7] = (float)((long long)(h >> 8 & 7) - 4) * 0.125f;
    V[11] = (float)(h >> 16 & 3) * 0.25f;
    if (cls == 4 && r == 0 && c == 0) { // turned around: diag(-1, 1, -1), z shifted
        V[0] = -1.f;
        V[10] = -1.f;
        V[11] = 0.f;
    }
}

__device__ inline float uni(uint64_t h) {
    return (float)(h >> 40) * (1.f / 16777216.f);
}

__device__ inline float gauss(uint64_t a, uint64_t b) {
    const float u = fmaxf(uni(a), 1e-7f), v = uni(b);
    return sqrtf(-2.f * logf(u)) * cospif(2.f * v);
}

// One thread per gaussian i < n: draws from (key, rank, i, attempt), rounded to bf16, until
// every decision in every camera of every rank is at least the margin from its boundary (fp64;
// 16 attempts, each failing with probability ~1e-3, so the last is never reached in practice).
__global__ void fill_gaussians(bf16 *means, bf16 *quats, bf16 *scales, bf16 *opac, bf16 *colors,
                               int64_t *n_out, long long n, uint64_t vkey, uint64_t ck, int rank,
                               int world, int C, int cls, float width, float height) {
    if (blockIdx.x == 0 && threadIdx.x == 0)
        *n_out = n;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        float m[3], q[4], s[3], op, col[3];
        for (int attempt = 0; attempt < 16; attempt++) {
            const uint64_t base = pk_splitmix64(vkey ^ ((uint64_t)rank << 48) ^
                                                ((uint64_t)attempt << 40) ^ (uint64_t)i);
            uint64_t u[16];
            for (int j = 0; j < 16; j++)
                u[j] = pk_splitmix64(base + (uint64_t)j);
            m[0] = (uni(u[0]) - 0.5f) * 1.5f;
            m[1] = (uni(u[1]) - 0.5f) * 1.5f;
            m[2] = uni(u[2]) * 2.f + 2.f;
            float smax = 0.02f;
            const int kind = (int)(u[3] % 5);
            if (cls == 1 && kind == 1)
                m[2] = -m[2]; // behind the camera
            if (cls == 1 && kind == 2)
                m[0] *= 6.f; // off to the side: straddling the image edges
            if (cls == 3) {
                m[0] *= 0.1f;
                m[1] *= 0.1f;
                m[2] = 3.f; // equal depths
                smax = 0.3f;
            }
            if (cls == 4 && kind < 2)
                m[2] = uni(u[2]) - 0.5f; // around the near plane, behind included
            for (int j = 0; j < 4; j++)
                q[j] = bf16_round(gauss(u[4 + j], u[8 + j]));
            for (int j = 0; j < 3; j++) {
                m[j] = bf16_round(m[j]);
                s[j] = bf16_round(uni(u[12 + j]) * smax);
            }
            op = bf16_round(uni(u[15]) * 0.8f + 0.1f);
            for (int j = 0; j < 3; j++)
                col[j] = bf16_round(uni(pk_splitmix64(base ^ (0x700ull + (uint64_t)j))));
            double md[3], qd[4], sd[3];
            for (int j = 0; j < 3; j++) {
                md[j] = m[j];
                sd[j] = s[j];
            }
            for (int j = 0; j < 4; j++)
                qd[j] = q[j];
            double worst = 1e30;
            for (int r = 0; r < world; r++)
                for (int c = 0; c < C; c++) {
                    float Vf[16], Kf[9];
                    double V[16], K[9];
                    camera_of(cls, ck, r, c, width, height, Vf, Kf);
                    for (int j = 0; j < 16; j++)
                        V[j] = Vf[j];
                    for (int j = 0; j < 9; j++)
                        K[j] = Kf[j];
                    proj_t<double> p;
                    gs_project<double>(md, qd, sd, V, K, (double)width, (double)height, p);
                    worst = p.margin < worst ? p.margin : worst;
                }
            if (worst >= 1e-3)
                break;
        }
        for (int j = 0; j < 3; j++) {
            means[3 * i + j] = __float2bfloat16(m[j]);
            scales[3 * i + j] = __float2bfloat16(s[j]);
            colors[3 * i + j] = __float2bfloat16(col[j]);
        }
        for (int j = 0; j < 4; j++)
            quats[4 * i + j] = __float2bfloat16(q[j]);
        opac[i] = __float2bfloat16(op);
    }
}

__global__ void fill_cameras(bf16 *views, bf16 *ks, int cls, uint64_t ck, int rank, int C,
                             float width, float height) {
    const int c = threadIdx.x;
    if (c >= C)
        return;
    float V[16], K[9];
    camera_of(cls, ck, rank, c, width, height, V, K);
    for (int j = 0; j < 16; j++)
        views[16 * c + j] = __float2bfloat16(V[j]);
    for (int j = 0; j < 9; j++)
        ks[9 * c + j] = __float2bfloat16(K[j]);
}

static int generate(const pk_problem_call *call, uint64_t seed, int key) {
    const pk_ctx *ctx = call->ctx;
    long long len[PK_MAX_RANKS];
    const long long N = call->dims[0], C = call->dims[1];
    const float width = (float)call->dims[2], height = (float)call->dims[3];
    const int cls = shard_plan(seed, key, ctx->world_size, N, len);
    const uint64_t vkey = pk_splitmix64(seed ^ 0x6161ull ^ ((uint64_t)(unsigned)key << 20));
    const uint64_t ck = pk_splitmix64(vkey ^ 0xca3ull);
    fill_cameras<<<1, 64, 0, ctx->stream>>>(static_cast<bf16 *>(call->args[6]),
                                            static_cast<bf16 *>(call->args[7]), cls, ck, ctx->rank,
                                            (int)C, width, height);
    fill_gaussians<<<grid_for(N), 256, 0, ctx->stream>>>(
        static_cast<bf16 *>(call->args[0]), static_cast<bf16 *>(call->args[1]),
        static_cast<bf16 *>(call->args[2]), static_cast<bf16 *>(call->args[3]),
        static_cast<bf16 *>(call->args[4]), static_cast<int64_t *>(call->args[5]), len[ctx->rank],
        vkey, ck, ctx->rank, ctx->world_size, (int)C, cls, width, height);
    return cuda_code(cudaGetLastError());
}

static int invoke(void *fn, const pk_problem_call *c) {
    if (!fn || c->n_args != 12 || c->n_dims < 4)
        return -1;
    return reinterpret_cast<entry_fn>(fn)(
        c->ctx, static_cast<const bf16 *>(c->args[0]), static_cast<const bf16 *>(c->args[1]),
        static_cast<const bf16 *>(c->args[2]), static_cast<const bf16 *>(c->args[3]),
        static_cast<const bf16 *>(c->args[4]), static_cast<const int64_t *>(c->args[5]),
        static_cast<const bf16 *>(c->args[6]), static_cast<const bf16 *>(c->args[7]),
        static_cast<int32_t *>(c->args[8]), static_cast<int32_t *>(c->args[9]),
        static_cast<float *>(c->args[10]), static_cast<int64_t *>(c->args[11]), (size_t)c->dims[0],
        (size_t)c->dims[1], (size_t)c->dims[2], (size_t)c->dims[3]);
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, invoke, generate, NULL, fini, NULL};
    return &module;
}
