// Shortcut twin (issue #26, "bf16 accumulation"): correct.cu's reduction across the ranks (fp32
// sum of the bf16 partials, LSA loads and stores), but the local convolution is a direct kernel
// whose accumulator is bf16: __hfma(weight, x, acc) for every product, input channels outer, the
// 27 taps inner (the weight's memory order), 27 Cl roundings of the running sum instead of
// PKB's one rounding of an fp32 sum. (On CUDA cores bf16x2 FMAs run at twice the fp32 rate,
// and a bf16 accumulator halves the registers.) It fails on every input regime at every W:
// the rounding errors of the running sum add up to ~0.05-0.4 rms of the output at elements near
// zero, 2-5 times the tolerance (bench/pkb/sim_76_opensora_conv3d_allreduce.c); coarser bf16
// accumulation (one rounding per tap or per 16-channel MMA step) is within what PKB's own bf16
// all-reduce costs and is not caught, see meta.json's about.
#include "pk_ctx.h"

#include <cuda/atomic>

typedef __nv_bfloat16 bf16;

#define MAX_CHUNKS 1
#define RED_THREADS 512
#define RED_CTAS 64

static struct {
    int ready;
    cudaStream_t red;
    cudaEvent_t start, done;
    int red_ctas;
} g;

extern "C" int solution_init(const pk_ctx *ctx) {
    if (g.ready)
        return 0;
    int least = 0, greatest = 0;
    cudaDeviceGetStreamPriorityRange(&least, &greatest);
    if (cudaStreamCreateWithPriority(&g.red, cudaStreamNonBlocking, greatest) != cudaSuccess)
        return 2;
    if (cudaEventCreateWithFlags(&g.start, cudaEventDisableTiming) != cudaSuccess ||
        cudaEventCreateWithFlags(&g.done, cudaEventDisableTiming) != cudaSuccess)
        return 3;
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device);
    g.red_ctas = RED_CTAS < sms ? RED_CTAS : sms;
    if (g.red_ctas > ctx->lsa_barrier_count)
        g.red_ctas = ctx->lsa_barrier_count;
    g.ready = g.red_ctas > 0;
    return g.ready ? 0 : 4;
}

extern "C" int solution_fini(const pk_ctx *ctx) {
    if (!g.ready)
        return 0;
    cudaStreamSynchronize(ctx->stream);
    cudaStreamDestroy(g.red);
    cudaEventDestroy(g.start);
    cudaEventDestroy(g.done);
    g.ready = 0;
    return 0;
}

#define CONV_THREADS 256
#define CI_TILE 32

// part[co][p] = the partial convolution with a bf16 accumulator: block (pixel tile, co); the
// weights of co for CI_TILE input channels at a time in shared memory.
__global__ void __launch_bounds__(CONV_THREADS)
    conv_bf16_acc(const bf16 *x, const bf16 *w, bf16 *part, long long Cl, long long T, long long Hh,
                  long long Wd, long long P) {
    __shared__ bf16 ws[CI_TILE * 27];
    const long long Ho = Hh - 2, Wo = Wd - 2, plane = Ho * Wo, co = blockIdx.y;
    const long long p = (long long)blockIdx.x * CONV_THREADS + threadIdx.x;
    const long long t = p / plane, i = p % plane / Wo, j = p % Wo;
    bf16 acc = __float2bfloat16(0.f);
    for (long long c0 = 0; c0 < Cl; c0 += CI_TILE) {
        const long long nc = Cl - c0 < CI_TILE ? Cl - c0 : CI_TILE;
        __syncthreads();
        for (long long e = threadIdx.x; e < nc * 27; e += CONV_THREADS)
            ws[e] = w[(co * Cl + c0) * 27 + e];
        __syncthreads();
        if (p >= P)
            continue;
        for (long long c = 0; c < nc; c++) {
            const bf16 *xc = x + (((c0 + c) * T + t) * Hh + i) * Wd + j;
#pragma unroll
            for (int tap = 0; tap < 27; tap++)
                acc = __hfma(ws[c * 27 + tap], xc[((tap / 9) * Hh + tap / 3 % 3) * Wd + tap % 3],
                             acc);
        }
    }
    if (p < P)
        part[co * P + p] = acc;
}

__device__ __forceinline__ void add_bf16x8(float acc[8], uint4 v) {
    const __nv_bfloat162 *h = reinterpret_cast<const __nv_bfloat162 *>(&v);
#pragma unroll
    for (int k = 0; k < 4; k++) {
        const float2 f = __bfloat1622float2(h[k]);
        acc[2 * k] += f.x;
        acc[2 * k + 1] += f.y;
    }
}

// Chunk c of the reduction, rank r's output channels: 16-byte vectors of 8 pixels. After the
// barrier every rank's partial of chunk c is complete (each rank's kernel waits for its GEMM).
__global__ void __launch_bounds__(RED_THREADS)
    reduce_chunk(ncclDevComm comm, ncclWindow_t win, size_t part_off, size_t y_off,
                 const bf16 *bias, int rank, int world, long long Co, long long P, long long Pc,
                 int c) {
    __shared__ const uint4 *part[8];
    __shared__ uint4 *out[8];
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           blockIdx.x);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    if ((int)threadIdx.x < world) {
        part[threadIdx.x] =
            static_cast<const uint4 *>(ncclGetLsaPointer(win, part_off, (int)threadIdx.x));
        out[threadIdx.x] = static_cast<uint4 *>(ncclGetLsaPointer(win, y_off, (int)threadIdx.x));
    }
    __syncthreads();
    const long long per = Co / world, row_vecs = Pc / 8, n = per * row_vecs;
    for (long long v = (long long)blockIdx.x * RED_THREADS + threadIdx.x; v < n;
         v += (long long)gridDim.x * RED_THREADS) {
        const long long co = rank * per + v / row_vecs;
        const long long at = (co * P + c * Pc) / 8 + v % row_vecs; // in vectors
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int q = 0; q < world; q++)
            add_bf16x8(acc, __ldcg(part[q] + at));
        const float b = __bfloat162float(bias[co]);
        uint4 o;
        __nv_bfloat162 *h = reinterpret_cast<__nv_bfloat162 *>(&o);
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const float s0 = __bfloat162float(__float2bfloat16(acc[2 * k])),
                        s1 = __bfloat162float(__float2bfloat16(acc[2 * k + 1]));
            h[k] = __floats2bfloat162_rn(s0 + b, s1 + b);
        }
        for (int j = 0; j < world; j++) // staggered: ranks do not all write one peer first
            out[(rank + j) % world][at] = o;
    }
}

// One CTA, barrier 0: every rank has finished reading our partials and writing our y.
__global__ void final_barrier(ncclDevComm comm) {
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           0);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
}

// Chunks of P whose length is a whole number of 16-byte vectors, at most MAX_CHUNKS; 0 if none.
static int pick_chunks(long long P) {
    for (int n = MAX_CHUNKS; n >= 1; n--)
        if (P % (8LL * n) == 0)
            return n;
    return 0;
}

extern "C" int solution(const pk_ctx *ctx, const bf16 *x, const bf16 *weight, const bf16 *bias,
                        bf16 *y, size_t Co, size_t Cl, size_t T, size_t Hh, size_t Wd) {
    if (solution_init(ctx))
        return 10;
    const int W = ctx->world_size, r = ctx->rank;
    const long long plane = (long long)(Hh - 2) * (long long)(Wd - 2),
                    P = (long long)(T - 2) * plane, ny = (long long)Co * P;
    cudaStream_t s = ctx->stream;
    bf16 *part = static_cast<bf16 *>(ctx->scratch);
    if (pick_chunks(P) == 0 || W > 8 || (long long)Co % W != 0 ||
        (size_t)ny * sizeof(bf16) > ctx->scratch_size || ((uintptr_t)y | (uintptr_t)part) % 16 != 0)
        return 12;
    const dim3 grid((unsigned)((P + CONV_THREADS - 1) / CONV_THREADS), (unsigned)Co);
    conv_bf16_acc<<<grid, CONV_THREADS, 0, s>>>(x, weight, part, (long long)Cl, (long long)T,
                                                (long long)Hh, (long long)Wd, P);
    const size_t part_off = pk_sym_offset(ctx, part), y_off = pk_sym_offset(ctx, y);
    cudaEventRecord(g.start, s);
    cudaStreamWaitEvent(g.red, g.start, 0);
    reduce_chunk<<<g.red_ctas, RED_THREADS, 0, g.red>>>(ctx->dev_comm, ctx->window, part_off, y_off,
                                                        bias, r, W, (long long)Co, P, P, 0);
    final_barrier<<<1, 32, 0, g.red>>>(ctx->dev_comm);
    cudaEventRecord(g.done, g.red);
    cudaStreamWaitEvent(s, g.done, 0);
    return cudaGetLastError() == cudaSuccess ? 0 : 16;
}
