// Wrong (subtly): as correct.cu, but every source chunk after rank 0's starts one row late
// (base = first + 1 for q > 0): an off-by-one at the shard boundary between sources. The chunk's
// first row is never written and its last row spills onto the next chunk's first row (or past
// the count, into the zeroed tail). Every call fails on every rank that receives a pair from a
// rank other than 0 (in every split mode some rank does: at least its own pairs, q = r > 0).
#include "pk_ctx.h"

#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cuda/atomic>

#define BLK 1024 // pairs per block, one per thread

__global__ void __launch_bounds__(BLK)
    count_owned(ncclDevComm comm, ncclWindow_t win, size_t idx_off, int r, int world, long long nnz,
                long long nb, long long *cnt) {
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           blockIdx.x);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
    typedef cub::BlockReduce<int, BLK> Reduce;
    __shared__ typename Reduce::TempStorage tmp;
    for (long long item = blockIdx.x; item < world * nb; item += gridDim.x) {
        const int q = (int)(item / nb);
        const long long e = (item % nb) * BLK + threadIdx.x;
        const int64_t *idx = static_cast<const int64_t *>(ncclGetLsaPointer(win, idx_off, q));
        int mine = 0;
        if (e < nnz) {
            long long o = idx[e] % world;
            mine = (o < 0 ? o + world : o) == r;
        }
        const int n = Reduce(tmp).Sum(mine);
        if (threadIdx.x == 0)
            cnt[item] = n;
        __syncthreads();
    }
}

// cnt[item] -> first output row of the item (exclusive prefix, in item order); total to *count.
__global__ void __launch_bounds__(BLK)
    scan_counts(long long *cnt, long long items, int64_t *count) {
    typedef cub::BlockScan<long long, BLK> Scan;
    __shared__ typename Scan::TempStorage tmp;
    long long carry = 0;
    for (long long s = 0; s < items; s += BLK) {
        const long long i = s + threadIdx.x;
        const long long v = i < items ? cnt[i] : 0;
        long long before, sum;
        Scan(tmp).ExclusiveSum(v, before, sum);
        if (i < items)
            cnt[i] = carry + before;
        carry += sum;
        __syncthreads();
    }
    if (threadIdx.x == 0)
        *count = carry;
}

__global__ void __launch_bounds__(BLK)
    copy_owned(ncclDevComm comm, ncclWindow_t win, size_t idx_off, size_t val_off, int r, int world,
               long long nnz, long long nb, const long long *first, int64_t *ridx, uint4 *rval,
               long long C, long long vecs, const int64_t *count) {
    typedef cub::BlockScan<int, BLK> Scan;
    __shared__ typename Scan::TempStorage tmp;
    __shared__ int src[BLK]; // the block's owned pairs, in order
    for (long long item = blockIdx.x; item < world * nb; item += gridDim.x) {
        const int q = (int)(item / nb);
        const long long e0 = (item % nb) * BLK, e = e0 + threadIdx.x;
        const int64_t *idx = static_cast<const int64_t *>(ncclGetLsaPointer(win, idx_off, q));
        const uint4 *val = static_cast<const uint4 *>(ncclGetLsaPointer(win, val_off, q));
        int64_t id = 0;
        int mine = 0;
        if (e < nnz) {
            id = idx[e];
            long long o = id % world;
            mine = (o < 0 ? o + world : o) == r;
        }
        int pos, n;
        Scan(tmp).ExclusiveSum(mine, pos, n);
        const long long base = first[item] + (q > 0); // one row late after the first source
        if (mine) {
            ridx[base + pos] = id;
            src[pos] = threadIdx.x;
        }
        __syncthreads();
        for (long long w = threadIdx.x; w < n * vecs; w += BLK)
            rval[(base + w / vecs) * vecs + w % vecs] = val[(e0 + src[w / vecs]) * vecs + w % vecs];
        __syncthreads();
    }
    const long long total = *count; // the tail: zero
    for (long long w = (long long)blockIdx.x * BLK + threadIdx.x; w < (C - total) * vecs;
         w += (long long)gridDim.x * BLK) {
        rval[total * vecs + w] = make_uint4(0, 0, 0, 0);
        if (w % vecs == 0)
            ridx[total + w / vecs] = 0;
    }
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           blockIdx.x);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
}

extern "C" int solution(const pk_ctx *ctx, const int64_t *idx, const __nv_bfloat16 *value,
                        int64_t *recv_idx, __nv_bfloat16 *recv_value, int64_t *recv_count, size_t N,
                        size_t nnz, size_t D, size_t C) {
    (void)N;
    if (D % 8 != 0 || ((uintptr_t)value | (uintptr_t)recv_value) % 16 != 0)
        return 1; // rows must be whole 16-byte vectors
    const long long nb = ((long long)nnz + BLK - 1) / BLK, items = ctx->world_size * nb;
    if ((size_t)items * sizeof(long long) > ctx->scratch_size)
        return 2;
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, ctx->device) != cudaSuccess)
        return 3;
    // Every CTA waits for its twin on each peer: all must be resident, one LSA barrier each.
    int grid = sms < ctx->lsa_barrier_count ? sms : ctx->lsa_barrier_count;
    if (grid < 1)
        return 4;
    long long *cnt = static_cast<long long *>(ctx->scratch);
    const size_t idx_off = pk_sym_offset(ctx, idx), val_off = pk_sym_offset(ctx, value);
    count_owned<<<grid, BLK, 0, ctx->stream>>>(ctx->dev_comm, ctx->window, idx_off, ctx->rank,
                                               ctx->world_size, (long long)nnz, nb, cnt);
    scan_counts<<<1, BLK, 0, ctx->stream>>>(cnt, items, recv_count);
    copy_owned<<<grid, BLK, 0, ctx->stream>>>(ctx->dev_comm, ctx->window, idx_off, val_off,
                                              ctx->rank, ctx->world_size, (long long)nnz, nb, cnt,
                                              recv_idx, reinterpret_cast<uint4 *>(recv_value),
                                              (long long)C, (long long)(D / 8), recv_count);
    return cudaGetLastError() == cudaSuccess ? 0 : 5;
}
