// Shortcut twin (issue #26, "skip the exchange"): no communication at all. It takes the
// latent to be the same on every rank (the usual tile-parallel VAE decode, where every rank
// holds the whole latent) and decodes and blends every tile from its own z, as correct.cu does
// from the owners' latents. But PKB draws z on every rank separately: a tile decodes from its
// owner's latent, so every tile this rank does not own (and every blend with one) is wrong, on
// every input, i.i.d. ones included.
#include "pk_ctx.h"

#include <stdlib.h>
#include <string.h>

typedef __nv_bfloat16 bf16;

#define LT 3
#define LS 32
#define ST 3
#define SS 24
#define UT 4
#define US 8
#define BS 64
#define KT 12
#define KS 192
#define MAX_TILES 4096
#define THREADS 256

static int *g_owner;    // owner of every tile, on the device
static int g_key[5];    // the dims and W g_owner was made for
static int g_pull_ctas; // CTAs of the pull kernel (one LSA barrier each)

static int imin(int a, int b) {
    return a < b ? a : b;
}

// PKB's _split_tiles: tiles sorted by size (C ts hs ws), largest first, stable; the tile at
// place k belongs to rank k % W.
static int make_owners(int C, int T, int Hh, int Wd, int W) {
    const int key[5] = {C, T, Hh, Wd, W};
    if (g_owner && memcmp(key, g_key, sizeof key) == 0)
        return 0;
    const int nt = (T + ST - 1) / ST, nh = (Hh + SS - 1) / SS, nw = (Wd + SS - 1) / SS;
    const int n = nt * nh * nw;
    if (n > MAX_TILES)
        return 1;
    static long long size[MAX_TILES];
    static int order[MAX_TILES], owner[MAX_TILES];
    for (int i = 0; i < n; i++) {
        const int ti = i / (nh * nw), hi = i / nw % nh, wi = i % nw;
        size[i] =
            (long long)C * imin(LT, T - ti * ST) * imin(LS, Hh - hi * SS) * imin(LS, Wd - wi * SS);
        int k = i;
        while (k > 0 && size[order[k - 1]] < size[i]) {
            order[k] = order[k - 1];
            k--;
        }
        order[k] = i;
    }
    for (int k = 0; k < n; k++)
        owner[order[k]] = k % W;
    cudaFree(g_owner);
    g_owner = NULL;
    if (cudaMalloc(&g_owner, n * sizeof(int)) != cudaSuccess ||
        cudaMemcpy(g_owner, owner, n * sizeof(int), cudaMemcpyHostToDevice) != cudaSuccess)
        return 2;
    memcpy(g_key, key, sizeof key);
    return 0;
}

extern "C" int solution_init(const pk_ctx *ctx) {
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device);
    g_pull_ctas = sms < ctx->lsa_barrier_count ? sms : ctx->lsa_barrier_count;
    return g_pull_ctas > 0 ? 0 : 1;
}

extern "C" int solution_fini(const pk_ctx *ctx) {
    cudaStreamSynchronize(ctx->stream);
    cudaFree(g_owner);
    g_owner = NULL;
    return 0;
}

// PyTorch's trilinear source index (align_corners=False).
__device__ __forceinline__ void src_index(int dst, float inv_scale, int in, int *i0, int *step,
                                          float *l1) {
    float s = inv_scale * ((float)dst + 0.5f) - 0.5f;
    s = s < 0.f ? 0.f : s;
    *i0 = (int)s;
    *step = *i0 < in - 1 ? 1 : 0;
    *l1 = s - (float)*i0;
}

// Decoded value (c, t, y, x) of tile (ti, hi, wi), from latent z (3 x T x Hh x Wd), as bf16.
__device__ float decoded(const bf16 *z, int T, int Hh, int Wd, int ti, int hi, int wi, int c, int t,
                         int y, int x) {
    const int t0 = ti * ST, h0 = hi * SS, w0 = wi * SS;
    const int ts = min(LT, T - t0), hs = min(LS, Hh - h0), ws = min(LS, Wd - w0);
    int t1, tp, y1, yp, x1, xp;
    float tl, yl, xl;
    src_index(t, 1.f / UT, ts, &t1, &tp, &tl);
    src_index(y, 1.f / US, hs, &y1, &yp, &yl);
    src_index(x, 1.f / US, ws, &x1, &xp, &xl);
    const float t0l = 1.f - tl, y0l = 1.f - yl, x0l = 1.f - xl;
    const bf16 *b = z + (((long long)c * T + t0 + t1) * Hh + h0 + y1) * Wd + w0 + x1;
    const long long sT = (long long)tp * Hh * Wd, sY = (long long)yp * Wd, sX = xp;
#define Z(o) __bfloat162float(b[o])
    const float v = t0l * (y0l * (x0l * Z(0) + xl * Z(sX)) + yl * (x0l * Z(sY) + xl * Z(sY + sX))) +
                    tl * (y0l * (x0l * Z(sT) + xl * Z(sT + sX)) +
                          yl * (x0l * Z(sT + sY) + xl * Z(sT + sY + sX)));
#undef Z
    return __bfloat162float(__float2bfloat16(v));
}

__device__ __forceinline__ float blend(float prev, float cur, int idx, int extent) {
    const double ratio = (double)idx / (double)extent;
    const float a = __bfloat162float(__float2bfloat16(prev * (float)(1.0 - ratio)));
    const float b = __bfloat162float(__float2bfloat16(cur * (float)ratio));
    return __bfloat162float(__float2bfloat16(a + b));
}

// Every element of y: its tile (only the last of a dimension is short), its decoded value, the
// blend with the tile above (rows < extent) and then with the tile to the left (columns).
__global__ void __launch_bounds__(THREADS)
    decode_blend(const bf16 *lat, const int *owner, bf16 *y, int T, int Hh, int Wd, int To, int Ho,
                 int Wo) {
    const int nt = (T + ST - 1) / ST, nh = (Hh + SS - 1) / SS, nw = (Wd + SS - 1) / SS;
    const long long n = 3LL * To * Ho * Wo;
    for (long long e = (long long)blockIdx.x * THREADS + threadIdx.x; e < n;
         e += (long long)gridDim.x * THREADS) {
        const int c = (int)(e / ((long long)To * Ho * Wo)),
                  t = (int)(e / ((long long)Ho * Wo) % To), r = (int)(e / Wo % Ho),
                  q = (int)(e % Wo);
        const int ti = min(t / KT, nt - 1), hi = min(r / KS, nh - 1), wi = min(q / KS, nw - 1);
        const int lt = t - ti * KT, ly = r - hi * KS, lx = q - wi * KS;
        const int i = (ti * nh + hi) * nw + wi;
        const int hs = min(LS, Hh - hi * SS), ws = min(LS, Wd - wi * SS);
        float v = decoded(lat, T, Hh, Wd, ti, hi, wi, c, lt, ly, lx);
        if (hi > 0) { // the tile above: full height (only the last tile is short)
            const int up_dh = US * min(LS, Hh - (hi - 1) * SS), eh = min(min(up_dh, US * hs), BS);
            if (ly < eh)
                v = blend(decoded(lat, T, Hh, Wd, ti, hi - 1, wi, c, lt, up_dh - eh + ly, lx), v,
                          ly, eh);
        }
        if (wi > 0) {
            const int left_dw = US * min(LS, Wd - (wi - 1) * SS),
                      ew = min(min(left_dw, US * ws), BS);
            if (lx < ew)
                v = blend(decoded(lat, T, Hh, Wd, ti, hi, wi - 1, c, lt, ly, left_dw - ew + lx), v,
                          lx, ew);
        }
        y[e] = __float2bfloat16(v);
    }
}

extern "C" int solution(const pk_ctx *ctx, const bf16 *z, bf16 *y, size_t C, size_t T, size_t Hh,
                        size_t Wd) {
    if (!g_pull_ctas && solution_init(ctx))
        return 1;
    const int W = ctx->world_size;
    if (make_owners((int)C, (int)T, (int)Hh, (int)Wd, W))
        return 2;
    const long long lat_n = 3LL * T * Hh * Wd;
    if ((size_t)(W * lat_n) * sizeof(bf16) > ctx->scratch_size)
        return 3;
    cudaStream_t s = ctx->stream;
    const int To = UT * (int)T, Ho = US * (int)Hh, Wo = US * (int)Wd; // meta.json's constraints
    const long long n = 3LL * To * Ho * Wo;
    const long long blocks = (n + THREADS - 1) / THREADS;
    decode_blend<<<(unsigned)(blocks < 16384 ? blocks : 16384), THREADS, 0, s>>>(
        z, g_owner, y, (int)T, (int)Hh, (int)Wd, To, Ho, Wo);
    return cudaGetLastError() == cudaSuccess ? 0 : 4;
}
