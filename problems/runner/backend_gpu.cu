// GPU backend: one rank per GPU, NCCL communicator, symmetric arena (ncclMemAlloc registered as
// one NCCL window, with an ncclDevComm for the device API), kernels for generation, poisoning
// and comparison, and per-iteration CUDA events on ctx->stream.
#include "pk_runner.h"
#include "rn_elem.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_profiler_api.h>
#include <dlfcn.h>
#include <cuda_runtime.h>
#include <math.h>
#include <nccl.h>
#include <nccl_device.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct gpu_state {
    cudaStream_t harness; // the harness's own copies and checks, never ctx->stream
    cudaStream_t cur;     // where operations go: harness, or ctx->stream in timed epilogues
    int lsa_barriers;     // one per SM: a CTA-per-SM kernel has one barrier per CTA
    void *flush;          // 2 x L2 bytes read to evict the L2
    size_t flush_bytes;
    unsigned long long *guard_out; // per zone: changed bytes, first, last offset
    ncclComm_t comm;
    ncclDevComm dev_comm;
    int have_dev_comm;
    ncclWindow_t window;
    void *arena;
    double *cmp; // device scratch for comparisons
    cudaEvent_t ev[2 * RN_MAX_RUN_CALLS];
    int n_events;
};

static gpu_state g_state;
static cudaStream_t timed_stream; // ctx->stream

static int cuda_fail(rn_backend *b, cudaError_t e, const char *what) {
    snprintf(b->error, sizeof b->error, "%s: %s", what, cudaGetErrorString(e));
    return -1;
}

static int nccl_fail(rn_backend *b, ncclResult_t r, const char *what) {
    snprintf(b->error, sizeof b->error, "%s: %s", what, ncclGetErrorString(r));
    return -1;
}

#define CU(b, call)                                                                                \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess)                                                                     \
            return cuda_fail(b, e_, #call);                                                        \
    } while (0)

// Same values as the host generator (rn_values.h).
__global__ void generate_kernel(void *p, int t, size_t n, uint64_t key, rn_gen g) {
    const int integer =
        t == PK_DTYPE_I32 || t == PK_DTYPE_I64 || t == PK_DTYPE_I8 || t == PK_DTYPE_U8;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        rn_store(p, t, i, rn_gen_value(&g, integer, key, i));
}

__global__ void positions_kernel(uint64_t *pos, uint64_t key, size_t count, size_t n) {
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < n;
         k += (size_t)gridDim.x * blockDim.x)
        pos[k] = rn_sample_pos(key, count, n, k);
}

__global__ void gather_kernel(unsigned char *dst, const unsigned char *src, size_t es,
                              const uint64_t *pos, size_t n) {
    for (size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x; k < n;
         k += (size_t)gridDim.x * blockDim.x) {
        const unsigned char *from = src + pos[k] * es;
        unsigned char *to = dst + k * es;
        switch (es) {
        case 1:
            *to = *from;
            break;
        case 2:
            *(uint16_t *)to = *(const uint16_t *)from;
            break;
        case 4:
            *(uint32_t *)to = *(const uint32_t *)from;
            break;
        default:
            *(uint64_t *)to = *(const uint64_t *)from;
        }
    }
}

// One block per zone.
__global__ void fill_guards_kernel(unsigned char *base, const rn_zone *z, uint64_t seed) {
    const rn_zone zone = z[blockIdx.x];
    for (uint64_t o = zone.lo + threadIdx.x; o < zone.hi; o += blockDim.x)
        base[o] = rn_guard_byte(seed, o);
}

__global__ void check_guards_kernel(const unsigned char *base, const rn_zone *z, uint64_t seed,
                                    unsigned long long *out) {
    const rn_zone zone = z[blockIdx.x];
    unsigned long long *mine = out + 3 * (size_t)blockIdx.x;
    for (uint64_t o = zone.lo + threadIdx.x; o < zone.hi; o += blockDim.x)
        if (base[o] != rn_guard_byte(seed, o)) {
            atomicAdd(&mine[0], 1ULL);
            atomicMin(&mine[1], (unsigned long long)(o - zone.lo));
            atomicMax(&mine[2], (unsigned long long)(o - zone.lo));
        }
}

__global__ void init_guard_out_kernel(unsigned long long *out, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
        out[3 * i] = 0;
        out[3 * i + 1] = ~0ULL;
        out[3 * i + 2] = 0;
    }
}

// Reads the whole buffer so that the L2 holds none of the job's lines (dirty ones are written
// back here, not inside the next timed call).
__global__ void flush_kernel(const uint4 *p, size_t n, unsigned *sink) {
    unsigned acc = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        uint4 v = p[i];
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x9e3779b9u) // practically never; keeps the loads
        *sink = acc;
}

__global__ void poison_kernel(void *p, int t, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        rn_poison(p, t, i);
}

// out[0] max abs (as ordered bits), out[1] max rel, out[2] first bad index (atomicMin),
// out[3] elements outside the tolerance, out[4] the largest ulp distance among them; as
// doubles, out[5] += the squared errors and out[6] += the squared reference values over the
// elements where the relative tolerance is the larger part (all when rtol is 0; one atomic per
// warp).
__global__ void compare_kernel(const void *got, const void *want, int t, size_t n, double atol,
                               double rtol, unsigned long long *out) {
    double err_sq = 0, want_sq = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        double g = rn_load(got, t, i), w = rn_load(want, t, i);
        if (rtol == 0 || rtol * fabs(w) >= atol || isnan(w)) { // the norm-wise part
            err_sq += isnan(g) || isnan(w) ? INFINITY : (g - w) * (g - w);
            want_sq += isnan(w) ? 0.0 : w * w;
        }
        double abs_err = fabs(g - w), rel_err = w != 0 ? abs_err / fabs(w) : abs_err;
        bool nan_seen = isnan(g) || isnan(w);
        bool ok = !nan_seen && abs_err <= atol + rtol * fabs(w);
        if (nan_seen)
            abs_err = rel_err = INFINITY;
        // Non-negative doubles order like their bit patterns.
        if (abs_err > 0)
            atomicMax(&out[0], (unsigned long long)__double_as_longlong(abs_err));
        if (rel_err > 0)
            atomicMax(&out[1], (unsigned long long)__double_as_longlong(rel_err));
        if (!ok) {
            atomicMin(&out[2], (unsigned long long)i);
            atomicAdd(&out[3], 1ULL);
            atomicMax(&out[4],
                      (unsigned long long)(nan_seen ? ~0ULL : rn_ulp_distance(got, want, t, i)));
        }
    }
    for (int d = 16; d > 0; d >>= 1) {
        err_sq += __shfl_down_sync(0xffffffffu, err_sq, d);
        want_sq += __shfl_down_sync(0xffffffffu, want_sq, d);
    }
    if ((threadIdx.x & 31) == 0) {
        atomicAdd((double *)&out[5], err_sq);
        atomicAdd((double *)&out[6], want_sq);
    }
}

// out[0] += sum of squares (one atomic per block).
__global__ void sumsq_kernel(const void *p, int t, size_t n, double *out) {
    __shared__ double part[256];
    double acc = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        double v = rn_load(p, t, i);
        acc += v == v ? v * v : 0.0;
    }
    part[threadIdx.x] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s)
            part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        atomicAdd(out, part[0]);
}

__global__ void equal_kernel(const unsigned char *x, const unsigned char *y, size_t n, int *diff) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        if (x[i] != y[i])
            *diff = 1;
}

__global__ void peer_pointers_kernel(ncclWindow_t w, int world, void **out) {
    for (int p = 0; p < world; p++)
        out[p] = ncclGetLsaPointer(w, 0, p);
}

static unsigned grid_for(size_t n) {
    size_t g = (n + 255) / 256;
    return (unsigned)(g < 1 ? 1 : g > 4096 ? 4096 : g);
}

static void *gpu_alloc(rn_backend *b, size_t bytes) {
    void *p = NULL;
    return cudaMalloc(&p, bytes ? bytes : 1) == cudaSuccess ? p : NULL;
}

#define MAX_REF_WINDOWS PK_MAX_ARGS
static void *ref_bufs[MAX_REF_WINDOWS];
static ncclWindow_t ref_wins[MAX_REF_WINDOWS];
static int n_ref;

// Reference outputs live in their own registered windows, outside the arena (the candidate
// cannot reach them through its pointers). Registered memory on both sides matters: host-driven
// ncclSend/ncclRecv (scatter, gather, all-to-all references) from the windowed arena into plain
// cudaMalloc memory hangs in NCCL 2.28.3 (seen on 2xH200, 2026-11-22). Every rank allocates
// them in the same order, which the collective registration needs.
static void *gpu_alloc_reference(rn_backend *b, size_t bytes) {
    void *p = NULL;
    if (n_ref == MAX_REF_WINDOWS || ncclMemAlloc(&p, bytes) != ncclSuccess)
        return NULL;
    if (ncclCommWindowRegister(g_state.comm, p, bytes, &ref_wins[n_ref], NCCL_WIN_COLL_SYMMETRIC) !=
        ncclSuccess) {
        ncclMemFree(p);
        return NULL;
    }
    ref_bufs[n_ref++] = p;
    return p;
}

static void gpu_free(rn_backend *b, void *p) {
    for (int i = 0; p && i < n_ref; i++)
        if (ref_bufs[i] == p) {
            ncclCommWindowDeregister(g_state.comm, ref_wins[i]);
            ncclMemFree(p);
            ref_bufs[i] = NULL;
            return;
        }
    if (p)
        cudaFree(p);
}

static int gpu_generate(rn_backend *b, void *p, pk_dtype t, size_t n, uint64_t key,
                        const rn_gen *gen) {
    generate_kernel<<<grid_for(n), 256, 0, g_state.cur>>>(p, (int)t, n, key, *gen);
    CU(b, cudaGetLastError());
    return 0;
}

static int gpu_poison(rn_backend *b, void *p, pk_dtype t, size_t n) {
    poison_kernel<<<grid_for(n), 256, 0, g_state.cur>>>(p, (int)t, n);
    CU(b, cudaGetLastError());
    return 0;
}

// On the harness stream a copy is complete when this returns; in a timed epilogue it is
// only enqueued. Either side may be host memory (the guard zone table is copied up once).
static int gpu_copy(rn_backend *b, void *dst, const void *src, size_t bytes) {
    CU(b, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, g_state.cur));
    if (g_state.cur == g_state.harness)
        CU(b, cudaStreamSynchronize(g_state.harness));
    return 0;
}

static int gpu_sample_positions(rn_backend *b, uint64_t *pos, uint64_t key, size_t count,
                                size_t n) {
    positions_kernel<<<grid_for(n), 256, 0, g_state.harness>>>(pos, key, count, n);
    CU(b, cudaGetLastError());
    CU(b, cudaStreamSynchronize(g_state.harness));
    return 0;
}

static int gpu_gather(rn_backend *b, void *dst, const void *src, size_t es, const uint64_t *pos,
                      size_t n) {
    if (n == 0)
        return 0;
    gather_kernel<<<grid_for(n), 256, 0, g_state.cur>>>((unsigned char *)dst,
                                                        (const unsigned char *)src, es, pos, n);
    CU(b, cudaGetLastError());
    return 0;
}

static int gpu_fill_guards(rn_backend *b, void *base, const rn_zone *z, int n, uint64_t seed) {
    if (n == 0)
        return 0;
    fill_guards_kernel<<<n, 256, 0, g_state.harness>>>((unsigned char *)base, z, seed);
    CU(b, cudaGetLastError());
    CU(b, cudaStreamSynchronize(g_state.harness));
    return 0;
}

static int gpu_check_guards(rn_backend *b, const void *base, const rn_zone *z, int n, uint64_t seed,
                            rn_guard_hit *hit) {
    static unsigned long long res[3 * RN_MAX_ZONES];
    hit->zone = -1;
    if (n == 0)
        return 0;
    init_guard_out_kernel<<<grid_for((size_t)n), 256, 0, g_state.harness>>>(g_state.guard_out, n);
    check_guards_kernel<<<n, 256, 0, g_state.harness>>>((const unsigned char *)base, z, seed,
                                                        g_state.guard_out);
    CU(b, cudaGetLastError());
    CU(b, cudaMemcpyAsync(res, g_state.guard_out, sizeof(unsigned long long) * 3 * (size_t)n,
                          cudaMemcpyDeviceToHost, g_state.harness));
    CU(b, cudaStreamSynchronize(g_state.harness));
    for (int i = 0; i < n; i++)
        if (res[3 * i]) {
            *hit = (rn_guard_hit){i, res[3 * i], res[3 * i + 1], res[3 * i + 2]};
            break;
        }
    return 0;
}

// The profile stage's timeline run injects pk-cupti-trace.so (CUDA_INJECTION64_PATH): it
// records from pk_cupti_trace_start to pk_cupti_trace_flush, called here, outside CUPTI's
// callbacks; the flush writes the records before the rank leaves with _exit. No-ops in every
// other run (the library is not loaded: dlopen RTLD_NOLOAD finds nothing).
static void call_injected_tracer(const char *fn) {
    const char *path = getenv("CUDA_INJECTION64_PATH");
    void *h = path && *path ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : NULL;
    if (!h)
        return;
    int (*f)(void) = (int (*)(void))dlsym(h, fn);
    if (f)
        f();
    dlclose(h);
}

static int gpu_profile_range(rn_backend *b, int on) {
    if (on)
        call_injected_tracer("pk_cupti_trace_start");
    cudaError_t e = on ? cudaProfilerStart() : cudaProfilerStop();
    if (!on)
        call_injected_tracer("pk_cupti_trace_flush");
    return e == cudaSuccess ? 0 : cuda_fail(b, e, on ? "cudaProfilerStart" : "cudaProfilerStop");
}

static int gpu_flush_l2(rn_backend *b) {
    if (!g_state.flush)
        return 0;
    size_t n = g_state.flush_bytes / sizeof(uint4);
    flush_kernel<<<grid_for(n), 256, 0, g_state.cur>>>((const uint4 *)g_state.flush, n,
                                                       (unsigned *)g_state.cmp + 1000);
    CU(b, cudaGetLastError());
    return 0;
}

static void gpu_use_timed_stream(rn_backend *b, int on) {
    (void)b;
    g_state.cur = on ? timed_stream : g_state.harness;
}

static void *gpu_current_stream(rn_backend *b) {
    (void)b;
    return (void *)g_state.cur;
}

static int gpu_equal(rn_backend *b, const void *x, const void *y, size_t bytes, int *eq) {
    if (bytes == 0) {
        *eq = 1;
        return 0;
    }
    int *flag = (int *)g_state.cmp;
    CU(b, cudaMemsetAsync(flag, 0, sizeof(int), g_state.harness));
    equal_kernel<<<grid_for(bytes), 256, 0, g_state.harness>>>(
        (const unsigned char *)x, (const unsigned char *)y, bytes, flag);
    int diff = 0;
    CU(b, cudaMemcpyAsync(&diff, flag, sizeof diff, cudaMemcpyDeviceToHost, g_state.harness));
    CU(b, cudaStreamSynchronize(g_state.harness));
    *eq = !diff;
    return 0;
}

static int gpu_compare(rn_backend *b, const void *got, const void *want, pk_dtype t, size_t n,
                       double atol, double rtol, rn_compare *out) {
    unsigned long long init[7] = {0, 0, ~0ULL, 0, 0, 0, 0}, res[7]; // 0 bits: 0.0
    memset(out, 0, sizeof *out);
    out->bad_index = -1;
    if (n == 0)
        return 0;
    unsigned long long *d = (unsigned long long *)g_state.cmp;
    CU(b, cudaMemcpyAsync(d, init, sizeof init, cudaMemcpyHostToDevice, g_state.harness));
    compare_kernel<<<grid_for(n), 256, 0, g_state.harness>>>(got, want, (int)t, n, atol, rtol, d);
    CU(b, cudaMemcpyAsync(res, d, sizeof res, cudaMemcpyDeviceToHost, g_state.harness));
    CU(b, cudaStreamSynchronize(g_state.harness));
    memcpy(&out->max_abs, &res[0], sizeof(double));
    memcpy(&out->max_rel, &res[1], sizeof(double));
    out->bad_index = res[2] == ~0ULL ? -1 : (long long)res[2];
    out->n_bad = (long long)res[3];
    out->max_ulp = res[4];
    memcpy(&out->err_sq, &res[5], sizeof(double));
    memcpy(&out->want_sq, &res[6], sizeof(double));
    if (out->bad_index >= 0) {
        size_t es = pk_dtype_size(t), i = (size_t)out->bad_index;
        unsigned char gv[8] = {0}, wv[8] = {0};
        CU(b, cudaMemcpy(gv, (const char *)got + i * es, es, cudaMemcpyDeviceToHost));
        CU(b, cudaMemcpy(wv, (const char *)want + i * es, es, cudaMemcpyDeviceToHost));
        out->got = rn_load(gv, (int)t, 0);
        out->expected = rn_load(wv, (int)t, 0);
    }
    return 0;
}

static int gpu_rms(rn_backend *b, const void *p, pk_dtype t, size_t n, double *out) {
    *out = 0;
    if (n == 0)
        return 0;
    double *d = (double *)g_state.cmp + 512; // clear of compare's and the peer table's slots
    CU(b, cudaMemsetAsync(d, 0, sizeof(double), g_state.harness));
    sumsq_kernel<<<grid_for(n), 256, 0, g_state.harness>>>(p, (int)t, n, d);
    double sum = 0;
    CU(b, cudaMemcpyAsync(&sum, d, sizeof sum, cudaMemcpyDeviceToHost, g_state.harness));
    CU(b, cudaStreamSynchronize(g_state.harness));
    *out = sqrt(sum / (double)n);
    return 0;
}

static int gpu_to_host(rn_backend *b, void *host, const void *src, size_t bytes) {
    CU(b, cudaMemcpy(host, src, bytes, cudaMemcpyDeviceToHost));
    return 0;
}

static int gpu_sync(rn_backend *b) {
    CU(b, cudaDeviceSynchronize());
    CU(b, cudaGetLastError());
    return 0;
}

static int gpu_sync_stream(rn_backend *b, pk_ctx *ctx) {
    CU(b, cudaStreamSynchronize(ctx->stream));
    CU(b, cudaGetLastError());
    return 0;
}

// Event pairs for `calls` timed calls, created once, before any timing: as many as the plan's
// largest run of calls (b->max_timed_calls, set before the arena), not RN_MAX_RUN_CALLS pairs
// (2050 driver calls at set-up, most never used).
static int ensure_events(rn_backend *b, int calls) {
    if (calls > RN_MAX_RUN_CALLS)
        calls = RN_MAX_RUN_CALLS;
    for (; g_state.n_events < 2 * calls; g_state.n_events++)
        CU(b, cudaEventCreate(&g_state.ev[g_state.n_events]));
    return 0;
}

static int gpu_time_calls(rn_backend *b, int (*call)(void *, int), int (*epilogue)(void *, int),
                          void *arg, int iters, double *us, double *host_total_us,
                          double *stream_total_us) {
    if (iters > RN_MAX_RUN_CALLS)
        iters = RN_MAX_RUN_CALLS;
    if (iters <= 0)
        return 0;
    if (ensure_events(b, iters)) // normally made at set-up already: a no-op
        return -1;
    CU(b, cudaDeviceSynchronize());
    double start = pk_now_us();
    for (int i = 0; i < iters; i++) {
        CU(b, cudaEventRecord(g_state.ev[2 * i], timed_stream));
        int rc = call(arg, i);
        if (rc) {
            snprintf(b->error, sizeof b->error, "call returned %d during timing", rc);
            return -1;
        }
        CU(b, cudaEventRecord(g_state.ev[2 * i + 1], timed_stream));
        if (epilogue(arg, i)) {
            snprintf(b->error, sizeof b->error, "the harness's epilogue failed after call %d", i);
            return -1;
        }
    }
    CU(b, cudaDeviceSynchronize()); // also waits for work the candidate left on other streams
    *host_total_us = pk_now_us() - start;
    for (int i = 0; i < iters; i++) {
        float ms = 0;
        CU(b, cudaEventElapsedTime(&ms, g_state.ev[2 * i], g_state.ev[2 * i + 1]));
        us[i] = ms * 1e3;
    }
    float total_ms = 0;
    CU(b, cudaEventElapsedTime(&total_ms, g_state.ev[0], g_state.ev[2 * iters - 1]));
    *stream_total_us = total_ms * 1e3;
    return 0;
}

static int gpu_setup_arena(rn_backend *b, pk_ctx *ctx, size_t bytes) {
    if (ensure_events(b, b->max_timed_calls > 16 ? b->max_timed_calls : 16))
        return -1;
    ncclResult_t r = ncclMemAlloc(&g_state.arena, bytes);
    if (r != ncclSuccess)
        return nccl_fail(b, r, "ncclMemAlloc");
    CU(b, cudaMemset(g_state.arena, 0, bytes));
    r = ncclCommWindowRegister(g_state.comm, g_state.arena, bytes, &g_state.window,
                               NCCL_WIN_COLL_SYMMETRIC);
    if (r != ncclSuccess)
        return nccl_fail(b, r, "ncclCommWindowRegister");
    // A problem without "device_api" gets no device communicator: its candidate cannot name
    // one (pk_ctx.h declares none), and creating it is a collective call that costs set-up time.
    if (b->device_api) {
        ncclDevCommRequirements reqs;
        memset(&reqs, 0, sizeof reqs);
        reqs.lsaBarrierCount = g_state.lsa_barriers;
        r = ncclDevCommCreate(g_state.comm, &reqs, &g_state.dev_comm);
        if (r != ncclSuccess)
            return nccl_fail(b, r, "ncclDevCommCreate");
        g_state.have_dev_comm = 1;
    }
    // NCCL has no host-side getter for peer addresses: ask the device. A one-rank communicator
    // (the reference's single-GPU diagnostic) has no LSA team: the lookup faults there, and the
    // only peer is ourselves (set below).
    if (ctx->world_size > 1) {
        void **d_peers = (void **)g_state.cmp + 8;
        peer_pointers_kernel<<<1, 1, 0, g_state.harness>>>(g_state.window, ctx->world_size,
                                                           d_peers);
        CU(b, cudaGetLastError());
        CU(b, cudaMemcpyAsync(ctx->peer_base, d_peers, sizeof(void *) * (size_t)ctx->world_size,
                              cudaMemcpyDeviceToHost, g_state.harness));
        CU(b, cudaStreamSynchronize(g_state.harness));
    }
    ctx->sym_base = g_state.arena;
    ctx->sym_size = bytes;
    ctx->window = g_state.window;
    if (g_state.have_dev_comm) {
        ctx->dev_comm = g_state.dev_comm;
        ctx->lsa_barrier_count = g_state.lsa_barriers;
    }
    // NCCL maps the window at its own addresses (ours included); our own entry stays the
    // ncclMemAlloc pointer, so pk_peer(ctx, p, rank) == p. Both alias the same memory.
    ctx->peer_base[ctx->rank] = ctx->sym_base;
    return 0;
}

static void gpu_fini(rn_backend *b, pk_ctx *ctx) {
    cudaDeviceSynchronize();
    if (g_state.have_dev_comm)
        ncclDevCommDestroy(g_state.comm, &g_state.dev_comm);
    if (g_state.window)
        ncclCommWindowDeregister(g_state.comm, g_state.window);
    if (g_state.arena)
        ncclMemFree(g_state.arena);
    if (g_state.comm)
        ncclCommDestroy(g_state.comm);
    cudaFree(g_state.flush);
    cudaFree(g_state.guard_out);
    cudaFree(g_state.cmp);
    ctx->sym_base = NULL;
}

static int setup_device(rn_backend *b, pk_ctx *ctx) {
    if (cudaSetDevice(ctx->device) != cudaSuccess)
        return cuda_fail(b, cudaGetLastError(), "cudaSetDevice");
    cudaDeviceProp prop;
    cudaError_t e = cudaGetDeviceProperties(&prop, ctx->device);
    if (e == cudaSuccess) {
        snprintf(b->name, sizeof b->name, "%.63s", prop.name);
        b->l2_bytes = (size_t)prop.l2CacheSize;
        // As nccl-tests sizes its device-API kernels: one CTA, hence one barrier, per SM.
        g_state.lsa_barriers = prop.multiProcessorCount;
        e = cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking);
    }
    if (e == cudaSuccess)
        e = cudaStreamCreateWithFlags(&g_state.harness, cudaStreamNonBlocking);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&g_state.cmp, 8192);
    if (e == cudaSuccess)
        e = cudaMalloc((void **)&g_state.guard_out, sizeof(unsigned long long) * 3 * RN_MAX_ZONES);
    g_state.flush_bytes = 2 * b->l2_bytes;
    if (e == cudaSuccess && g_state.flush_bytes)
        e = cudaMalloc(&g_state.flush, g_state.flush_bytes);
    if (e == cudaSuccess && g_state.flush)
        e = cudaMemset(g_state.flush, 1, g_state.flush_bytes);
    if (e != cudaSuccess)
        return cuda_fail(b, e, "device setup");
    timed_stream = ctx->stream;
    g_state.cur = g_state.harness;
    return 0;
}

extern "C" int rn_backend_gpu_init(rn_backend *b, pk_ctx *ctx, rn_group *g, int device) {
    memset(b, 0, sizeof *b);
    b->gpu = 1;
    b->alloc_private = gpu_alloc;
    b->free_private = gpu_free;
    b->alloc_reference = gpu_alloc_reference;
    b->generate = gpu_generate;
    b->poison = gpu_poison;
    b->copy = gpu_copy;
    b->equal = gpu_equal;
    b->compare = gpu_compare;
    b->sync = gpu_sync;
    b->sync_stream = gpu_sync_stream;
    b->time_calls = gpu_time_calls;
    b->sample_positions = gpu_sample_positions;
    b->gather = gpu_gather;
    b->fill_guards = gpu_fill_guards;
    b->check_guards = gpu_check_guards;
    b->flush_l2 = gpu_flush_l2;
    b->profile_range = gpu_profile_range;
    b->use_timed_stream = gpu_use_timed_stream;
    b->current_stream = gpu_current_stream;
    b->setup_arena = gpu_setup_arena;
    b->to_host = gpu_to_host;
    b->rms = gpu_rms;
    b->fini = gpu_fini;
    // CUDA_VISIBLE_DEVICES holds exactly the job's GPUs (device = rank), or under
    // --rank-visibility own only this rank's (device 0).
    ctx->device = device;
    // Device setup has no collectives; all ranks agree on its outcome before NCCL init, so
    // that one failing rank cannot leave the others waiting in ncclCommInitRank.
    int ok = setup_device(b, ctx) == 0, all_ok[PK_MAX_RANKS];
    if (g->allgather(g, &ok, all_ok, sizeof ok))
        return -1;
    for (int r = 0; r < g->world; r++)
        if (!all_ok[r]) {
            if (ok)
                snprintf(b->error, sizeof b->error, "device setup failed on rank %d", r);
            return -1;
        }
    struct {
        ncclUniqueId id;
        int ok;
    } boot;
    memset(&boot, 0, sizeof boot);
    if (g->rank == 0)
        boot.ok = ncclGetUniqueId(&boot.id) == ncclSuccess;
    if (rn_group_broadcast(g, &boot, sizeof boot, 0) || !boot.ok) {
        snprintf(b->error, sizeof b->error, "cannot create or share the NCCL unique id");
        return -1;
    }
    ncclUniqueId id = boot.id;
    ncclResult_t r = ncclCommInitRank(&g_state.comm, g->world, id, g->rank);
    if (r != ncclSuccess)
        return nccl_fail(b, r, "ncclCommInitRank");
    ctx->comm = g_state.comm;
    return 0;
}
