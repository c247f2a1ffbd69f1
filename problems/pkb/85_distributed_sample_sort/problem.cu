// pkb/85_distributed_sample_sort (ParallelKernelBench problem 85): a distributed sort. Rank r
// holds n_r values (x, an N-element bf16 capacity whose first n = n_r are its shard; 0 <= n_r <=
// N, ragged, zero on some ranks); the output is the sorted sequence of all T = sum n_r values,
// split exactly as PKB's _target_range: rank r gets positions [r b + min(r, e), ... + b + (r < e))
// with b = T / W, e = T % W. out (N capacity) holds them ascending, the rest of the capacity zero;
// out_n = their count. Equal values are indistinguishable (values only): the output is unique,
// -0 and +0 compare equal (the checker compares numerically with tolerance 0).
// PKB: a sample sort: local sort, regular samples, splitters, a variable all-to-all into buckets,
// a merge, and an exact redistribution by global position (a second variable all-to-all).
#include "pk_problem_module.h"
#include "pk_splitmix.h"

#include <cub/cub.cuh>
#include <cuda_bf16.h>

#include <algorithm>
#include <stdint.h>
#include <stdlib.h>
#include <vector>

typedef __nv_bfloat16 bf16;

typedef int (*entry_fn)(const pk_ctx *, const bf16 *, const int64_t *, bf16 *, int64_t *, size_t);

// The runner's call keys (problems/runner/pk_runner.h).
#define KEY_POST_TIMING (1 << 20)
#define KEY_TIMED_BASE (1 << 21)

static int cuda_code(cudaError_t e) {
    return e == cudaSuccess ? 0 : 2000 + (int)e;
}

static int nccl_code(ncclResult_t r) {
    return r == ncclSuccess ? 0 : 1000 + (int)r;
}

// bf16 bits -> an unsigned key in the values' order (-0 as +0), and back (+0 for -0).
__device__ __forceinline__ uint16_t order_key(uint16_t b) {
    if (b == 0x8000)
        b = 0;
    return (b & 0x8000) ? (uint16_t)~b : (uint16_t)(b | 0x8000);
}

__device__ __forceinline__ uint16_t key_bits(uint16_t k) {
    return (k & 0x8000) ? (uint16_t)(k & 0x7fff) : (uint16_t)~k;
}

// The reference's buffers: one NCCL window (ncclMemAlloc'ed and registered: NCCL 2.28 can hang
// between registered and plain memory; made in the first call by every rank) holding the sizes
// [W], the samples [W][W] (u64), the send counts [W] and receive counts [W], the local sorted
// keys [N], the received keys [W N] (a rank may receive everything), the merged keys [W N]
// and the final keys [N]; CUB's temporary storage in plain memory; pinned host staging.
static struct {
    uint8_t *buf;
    size_t bytes;
    ncclWindow_t win;
    void *cub_tmp;
    size_t cub_bytes;
    int64_t *host; // pinned: sizes, samples, counts, boundaries
    size_t host_bytes;
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
    int64_t *sizes, *samples, *send_counts, *recv_counts, *bounds;
    uint16_t *local, *sorted, *recv, *merged, *final_keys;
};

static layout carve(uint8_t *base, int W, long long N) {
    layout l;
    size_t off = 0;
    const auto take = [&](size_t bytes) {
        uint8_t *p = base + off;
        off += align256(bytes);
        return p;
    };
    l.sizes = (int64_t *)take(8 * (size_t)W);
    l.samples = (int64_t *)take(8 * (size_t)W * W);
    l.send_counts = (int64_t *)take(8 * (size_t)W);
    l.recv_counts = (int64_t *)take(8 * (size_t)W);
    l.bounds = (int64_t *)take(8 * (size_t)(W + 1));
    l.local = (uint16_t *)take(2 * (size_t)N);
    l.sorted = (uint16_t *)take(2 * (size_t)N);
    l.recv = (uint16_t *)take(2 * (size_t)W * N);
    l.merged = (uint16_t *)take(2 * (size_t)W * N);
    l.final_keys = (uint16_t *)take(2 * (size_t)N);
    return l;
}

static size_t layout_bytes(int W, long long N) {
    return 5 * align256(8 * (size_t)(W + 1) * W) + 3 * align256(2 * (size_t)N) +
           2 * align256(2 * (size_t)W * N);
}

static int ref_buffers(const pk_ctx *ctx, long long N) {
    const int W = ctx->world_size;
    const size_t bytes = layout_bytes(W, N);
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
    int rc = cuda_code(cub::DeviceRadixSort::SortKeys(NULL, need, (uint16_t *)NULL,
                                                      (uint16_t *)NULL, (int)(W * N)));
    if (!rc && g_ref.cub_bytes < need) {
        cudaFree(g_ref.cub_tmp);
        g_ref.cub_bytes = 0;
        rc = cuda_code(cudaMalloc(&g_ref.cub_tmp, need));
        if (!rc)
            g_ref.cub_bytes = need;
    }
    const size_t host = 8 * (size_t)(W * W + 4 * W + 4);
    if (!rc && g_ref.host_bytes < host) {
        cudaFreeHost(g_ref.host);
        g_ref.host_bytes = 0;
        rc = cuda_code(cudaMallocHost((void **)&g_ref.host, host));
        if (!rc)
            g_ref.host_bytes = host;
    }
    return rc;
}

static unsigned grid_for(long long n) {
    const long long b = (n + 255) / 256;
    return (unsigned)(b < 1 ? 1 : b < 8192 ? b : 8192);
}

// keys[i] = order_key(x[i]) for i < n (n read on the device, clamped to [0, N]); sizes_out = n.
__global__ void encode(const bf16 *x, const int64_t *n_in, uint16_t *keys, int64_t *size_out,
                       long long N) {
    const long long n = *n_in < 0 ? 0 : *n_in > N ? N : *n_in;
    if (blockIdx.x == 0 && threadIdx.x == 0)
        *size_out = n;
    const uint16_t *xb = reinterpret_cast<const uint16_t *>(x);
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        keys[i] = order_key(xb[i]);
}

// PKB's _extract_samples: s samples at positions ((j + 1) n) / s - 1 (n > s) or j (n <= s),
// packed as key << 40 | sort_rank << 32 | position (PKB's tuple order); -1 where none.
__global__ void extract_samples(const uint16_t *sorted, long long n, int s, int sort_rank,
                                int64_t *samples) {
    const int j = threadIdx.x;
    if (j >= s)
        return;
    int64_t v = -1;
    if (sort_rank >= 0 && n > 0) {
        long long pos = -1;
        if (s < n)
            pos = (long long)(j + 1) * n / s - 1;
        else if (j < n)
            pos = j;
        if (pos >= 0)
            v = (int64_t)((uint64_t)sorted[pos] << 40 | (uint64_t)sort_rank << 32 | (uint64_t)pos);
    }
    samples[j] = v;
}

// PKB's _split_positions for each splitter: searchsorted left (this rank after the splitter's),
// right (before it) or the splitter's own position + 1; bounds[k + 1], raw (clamped on the host).
__global__ void split_positions(const uint16_t *sorted, long long n, const int64_t *splitters,
                                int count, int sort_rank, int64_t *bounds) {
    const int k = threadIdx.x;
    if (k >= count)
        return;
    const uint64_t sp = (uint64_t)splitters[k];
    const uint16_t key = (uint16_t)(sp >> 40);
    const int srank = (int)(sp >> 32 & 0xff);
    const long long spos = (long long)(sp & 0xffffffffull);
    long long end;
    if (sort_rank == srank) {
        end = spos + 1;
    } else {
        long long lo = 0, hi = n; // first index with sorted[i] > key (right) or >= key (left)
        while (lo < hi) {
            const long long mid = (lo + hi) / 2;
            if (sort_rank > srank ? sorted[mid] < key : sorted[mid] <= key)
                lo = mid + 1;
            else
                hi = mid;
        }
        end = lo;
    }
    bounds[k] = end;
}

// out[i] = the value of keys[i] for i < count, zero to N; out_n = count.
__global__ void decode(const uint16_t *keys, long long count, bf16 *out, int64_t *out_n,
                       long long N) {
    uint16_t *ob = reinterpret_cast<uint16_t *>(out);
    if (blockIdx.x == 0 && threadIdx.x == 0)
        *out_n = count;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < N;
         i += (long long)gridDim.x * blockDim.x)
        ob[i] = i < count ? key_bits(keys[i]) : (uint16_t)0;
}

static int sync_host(cudaStream_t s, void *dst, const void *src, size_t bytes) {
    int rc = cuda_code(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s));
    return rc ? rc : cuda_code(cudaStreamSynchronize(s));
}

// PKB's _variable_all_to_all: counts first (all-to-all of one int64 per pair, host sync), then
// the keys (as bytes: NCCL has no 16-bit unsigned type; a send/recv moves bytes).
static int variable_all_to_all(const pk_ctx *ctx, const layout &l, const uint16_t *send,
                               const long long *send_off, uint16_t *recv, long long *recv_off) {
    const int W = ctx->world_size;
    cudaStream_t s = ctx->stream;
    int rc = nccl_code(ncclGroupStart());
    for (int j = 0; j < W && !rc; j++) {
        rc = nccl_code(ncclSend(l.send_counts + j, 1, ncclInt64, j, ctx->comm, s));
        if (!rc)
            rc = nccl_code(ncclRecv(l.recv_counts + j, 1, ncclInt64, j, ctx->comm, s));
    }
    int end = nccl_code(ncclGroupEnd());
    if (rc || end)
        return rc ? rc : end;
    rc = sync_host(s, g_ref.host, l.recv_counts, 8 * (size_t)W);
    if (rc)
        return rc;
    recv_off[0] = 0;
    for (int j = 0; j < W; j++)
        recv_off[j + 1] = recv_off[j] + g_ref.host[j];
    rc = nccl_code(ncclGroupStart());
    for (int j = 0; j < W && !rc; j++) {
        const long long sc = send_off[j + 1] - send_off[j], rcnt = recv_off[j + 1] - recv_off[j];
        if (sc > 0)
            rc =
                nccl_code(ncclSend(send + send_off[j], 2 * (size_t)sc, ncclUint8, j, ctx->comm, s));
        if (!rc && rcnt > 0)
            rc = nccl_code(
                ncclRecv(recv + recv_off[j], 2 * (size_t)rcnt, ncclUint8, j, ctx->comm, s));
    }
    end = nccl_code(ncclGroupEnd());
    return rc ? rc : end;
}

static int sort_keys(const uint16_t *in, uint16_t *out, long long n, cudaStream_t s) {
    if (n <= 0)
        return 0;
    size_t bytes = g_ref.cub_bytes;
    return cuda_code(
        cub::DeviceRadixSort::SortKeys(g_ref.cub_tmp, bytes, in, out, (int)n, 0, 16, s));
}

// Baseline, PKB's steps one after another, with its host synchronizations (PKB's .item() and
// .tolist()): encode and sort the shard (CUB radix sort of order-preserving 16-bit keys), all-
// gather the sizes, the active ranks' regular samples all-gathered and sorted on the host into
// W_active - 1 splitters (value, rank, position), the bucket boundaries by binary search on the
// device, the variable all-to-all into buckets, a sort of the received keys (PKB's cat + sort),
// the sizes all-gathered again and the exact redistribution by global position (a second
// variable all-to-all), then decode into out with the capacity's tail zeroed.
static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const int W = ctx->world_size, me = ctx->rank;
    const long long N = call->dims[0];
    const bf16 *x = static_cast<const bf16 *>(call->args[0]);
    const int64_t *n_in = static_cast<const int64_t *>(call->args[1]);
    bf16 *out = static_cast<bf16 *>(call->args[2]);
    int64_t *out_n = static_cast<int64_t *>(call->args[3]);
    cudaStream_t s = ctx->stream;
    int rc = ref_buffers(ctx, N);
    if (rc)
        return rc;
    const layout l = carve(g_ref.buf, W, N);
    int64_t *h = g_ref.host;
    encode<<<grid_for(N), 256, 0, s>>>(x, n_in, l.local, l.sizes + me, N);
    rc = cuda_code(cudaGetLastError());
    if (!rc)
        rc = nccl_code(ncclAllGather(l.sizes + me, l.sizes, 1, ncclInt64, ctx->comm, s));
    if (!rc)
        rc = sync_host(s, h, l.sizes, 8 * (size_t)W);
    if (rc)
        return rc;
    std::vector<long long> sizes(h, h + W);
    const long long n = sizes[me];
    rc = sort_keys(l.local, l.sorted, n, s);
    std::vector<int> active;
    for (int q = 0; q < W; q++)
        if (sizes[q] > 0)
            active.push_back(q);
    const int A = (int)active.size();
    int sort_rank = -1;
    for (int k = 0; k < A; k++)
        if (active[k] == me)
            sort_rank = k;
    if (rc || A == 0) {
        if (!rc)
            decode<<<grid_for(N), 256, 0, s>>>(l.final_keys, 0, out, out_n, N);
        return rc ? rc : cuda_code(cudaGetLastError());
    }
    // Samples: A per rank (PKB's n_samples = active_count), all-gathered.
    extract_samples<<<1, 256, 0, s>>>(l.sorted, n, A, sort_rank, l.samples + (size_t)me * A);
    rc = cuda_code(cudaGetLastError());
    if (!rc)
        rc = nccl_code(ncclAllGather(l.samples + (size_t)me * A, l.samples, (size_t)A, ncclInt64,
                                     ctx->comm, s));
    if (!rc)
        rc = sync_host(s, h, l.samples, 8 * (size_t)W * A);
    if (rc)
        return rc;
    std::vector<int64_t> samples;
    for (int i = 0; i < W * A; i++)
        if (h[i] >= 0)
            samples.push_back(h[i]);
    std::sort(samples.begin(), samples.end()); // (value, rank, position)
    const long long usable = (long long)samples.size();
    std::vector<int64_t> splitters;
    for (int k = 0; k + 1 < A; k++) {
        long long idx = (long long)(k + 1) * usable / A - 1;
        idx = idx < 0 ? 0 : idx > usable - 1 ? usable - 1 : idx;
        splitters.push_back(samples[idx]);
    }
    // Bucket boundaries (PKB's _split_positions; a rank that is not active sends nothing).
    std::vector<long long> bounds(A + 1, 0);
    if (sort_rank >= 0 && A > 1) {
        rc = cuda_code(cudaMemcpyAsync(l.samples, splitters.data(), 8 * splitters.size(),
                                       cudaMemcpyHostToDevice, s));
        split_positions<<<1, 256, 0, s>>>(l.sorted, n, l.samples, A - 1, sort_rank, l.bounds);
        if (!rc)
            rc = cuda_code(cudaGetLastError());
        if (!rc)
            rc = sync_host(s, h, l.bounds, 8 * (size_t)(A - 1));
        if (rc)
            return rc;
        for (int k = 0; k + 1 < A; k++) {
            const long long e = h[k] < n ? h[k] : n;
            bounds[k + 1] = std::max(bounds[k], e);
        }
    }
    if (sort_rank >= 0)
        bounds[A] = n;
    std::vector<long long> send_off(W + 1, 0), recv_off(W + 1, 0);
    for (int q = 0; q < W; q++) { // bucket k goes to active rank active[k]
        long long c = 0;
        for (int k = 0; k < A; k++)
            if (active[k] == q && sort_rank >= 0)
                c = bounds[k + 1] - bounds[k];
        h[q] = c;
        send_off[q + 1] = send_off[q] + c;
    }
    rc = cuda_code(cudaMemcpyAsync(l.send_counts, h, 8 * (size_t)W, cudaMemcpyHostToDevice, s));
    if (!rc) // the counts must reach the device before the host reuses its staging
        rc = cuda_code(cudaStreamSynchronize(s));
    if (!rc)
        rc = variable_all_to_all(ctx, l, l.sorted, send_off.data(), l.recv, recv_off.data());
    if (rc)
        return rc;
    const long long m = recv_off[W];
    rc = sort_keys(l.recv, l.merged, m, s); // PKB's _merge_sorted: cat, sort
    // _redistribute_exact: the merged sizes all-gathered, then rank r's [start, end) of the
    // global order goes to the rank whose _target_range covers it.
    int64_t *msize = l.sizes; // reused: the first sizes are on the host already
    if (!rc)
        rc = cuda_code(cudaMemcpyAsync(msize + me, &m, 8, cudaMemcpyHostToDevice, s));
    if (!rc)
        rc = nccl_code(ncclAllGather(msize + me, msize, 1, ncclInt64, ctx->comm, s));
    if (!rc)
        rc = sync_host(s, h, msize, 8 * (size_t)W);
    if (rc)
        return rc;
    long long total = 0, bucket_start = 0;
    for (int q = 0; q < W; q++) {
        if (q < me)
            bucket_start += h[q];
        total += h[q];
    }
    const long long base = total / W, extra = total % W;
    for (int q = 0; q < W; q++) {
        const long long ts = q * base + std::min<long long>(q, extra);
        const long long te = ts + base + (q < extra ? 1 : 0);
        const long long a = std::max(bucket_start, ts), b = std::min(bucket_start + m, te);
        h[q] = a < b ? b - a : 0;
        send_off[q + 1] = send_off[q] + h[q];
    }
    // The merged keys are sent in order, so send_off[q] is also the offset into merged.
    rc = cuda_code(cudaMemcpyAsync(l.send_counts, h, 8 * (size_t)W, cudaMemcpyHostToDevice, s));
    if (!rc)
        rc = cuda_code(cudaStreamSynchronize(s));
    if (!rc)
        rc = variable_all_to_all(ctx, l, l.merged, send_off.data(), l.final_keys, recv_off.data());
    if (rc)
        return rc;
    decode<<<grid_for(N), 256, 0, s>>>(l.final_keys, recv_off[W], out, out_n, N);
    return cuda_code(cudaGetLastError());
}

__global__ void fill_shard(bf16 *x, int64_t *n_out, long long n, long long N, uint64_t key,
                           int rank, int cls) {
    if (blockIdx.x == 0 && threadIdx.x == 0)
        *n_out = n;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        const uint64_t r = pk_splitmix64(key ^ ((uint64_t)rank << 48) ^ (uint64_t)i);
        float v;
        if (cls == 3) { // a few values, many duplicates, -0 and +0 among them
            const float set[6] = {-1.f, -0.f, 0.f, 0.f, 1.f, 2.5f};
            v = set[r % 6];
        } else if (cls == 4) { // one value on every rank: a single tie group
            v = 3.f;
        } else { // PKB's: randint(-50, 50) - rank * n, rounded to bf16
            v = (float)((long long)(r % 100) - 50 - (long long)rank * (n > 1 ? n : 1));
        }
        x[i] = __float2bfloat16(v);
    }
}

// Every rank's shard length for call `key` (the same on every rank) and its values' class.
// Trials (key % 5): 0 PKB's (every rank N, PKB's values: rank r's around -r N, so each rank's
// values form one block: skewed buckets); 1 lengths 0..N; 2 PKB's trial 3 (odd ranks empty);
// 3 one rank N, the others 0..N/16, values from {-1, -0, 0, 1, 2.5} (ties everywhere, -0 and
// +0); 4 every rank N, one value everywhere (one tie group across all ranks). After timing: as
// 1. Timed calls: every rank N with PKB's values (the same work every call).
static int shard_plan(uint64_t seed, int key, int world, long long N, long long *len) {
    const uint64_t k = pk_splitmix64(seed ^ pk_splitmix64(0x85ull << 40 ^ (uint64_t)(unsigned)key));
    const auto draw = [&](int j, long long lo, long long hi) {
        return lo + (long long)(pk_splitmix64(k + (uint64_t)j) % (uint64_t)(hi - lo + 1));
    };
    if (key >= KEY_TIMED_BASE) {
        for (int r = 0; r < world; r++)
            len[r] = N;
        return 0;
    }
    const int cls = key == KEY_POST_TIMING ? 1 : key % 5;
    for (int r = 0; r < world; r++) {
        if (cls == 0 || cls == 4)
            len[r] = N;
        else if (cls == 1)
            len[r] = draw(r, 0, N);
        else if (cls == 2)
            len[r] = r % 2 ? 0 : N;
        else
            len[r] = draw(r, 0, N / 16);
    }
    if (cls == 3)
        len[draw(100, 0, world - 1)] = N;
    return cls;
}

static int generate(const pk_problem_call *call, uint64_t seed, int key) {
    const pk_ctx *ctx = call->ctx;
    long long len[PK_MAX_RANKS];
    const long long N = call->dims[0];
    const int cls = shard_plan(seed, key, ctx->world_size, N, len);
    const uint64_t vkey = pk_splitmix64(seed ^ 0x8585ull ^ ((uint64_t)(unsigned)key << 20));
    fill_shard<<<grid_for(N), 256, 0, ctx->stream>>>(static_cast<bf16 *>(call->args[0]),
                                                     static_cast<int64_t *>(call->args[1]),
                                                     len[ctx->rank], N, vkey, ctx->rank, cls);
    return cuda_code(cudaGetLastError());
}

static int invoke(void *fn, const pk_problem_call *c) {
    if (!fn || c->n_args != 4 || c->n_dims < 1)
        return -1;
    return reinterpret_cast<entry_fn>(fn)(
        c->ctx, static_cast<const bf16 *>(c->args[0]), static_cast<const int64_t *>(c->args[1]),
        static_cast<bf16 *>(c->args[2]), static_cast<int64_t *>(c->args[3]), (size_t)c->dims[0]);
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, invoke, generate, NULL, fini, NULL};
    return &module;
}
