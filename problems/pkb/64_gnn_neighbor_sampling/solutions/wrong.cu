// Wrong (subtle): an off-by-one at the end of the rank's seed shard. The seeds are marked as
// seen for i < S - 1 only, so the last seed is not in the first-occurrence table: when a
// frontier node samples it, it is appended to node a second time (and its index moves there),
// which changes node, sizes and the relabelled row / col. On PKB's graph (seeds r S .. r S + S - 1,
// neighbours v + 1 .. v + 16) the last seed is the neighbour of the one before it: every call
// fails; on the other graphs whenever some sample reaches the last seed. Otherwise correct.cu.
#include "pk_ctx.h"

#include <cub/device/device_scan.cuh>
#include <cub/device/device_select.cuh>
#include <cuda/atomic>

__global__ void lsa_barrier(ncclDevComm comm) {
    ncclLsaBarrierSession<ncclCoopCta> bar(ncclCoopCta(), comm, ncclTeamLsa(comm), comm.lsaBarrier,
                                           0);
    bar.sync(ncclCoopCta(), cuda::memory_order_acq_rel);
}

__global__ void start_call(const int64_t *seeds, long long S, int *first, int *idx_of,
                           int64_t *node, int64_t *src, long long *cnt) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < S;
         i += (long long)gridDim.x * blockDim.x) {
        const int64_t u = seeds[i];
        if (i < S - 1) // the seeds this rank starts from, as seen
            first[u] = -1;
        idx_of[u] = (int)i;
        node[i] = u;
        src[i] = u;
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        cnt[0] = S; // nodes
        cnt[1] = 0; // edges
        cnt[2] = S; // frontier
    }
}

__global__ void local_takes(const int64_t *src, const long long *cnt, const int64_t *colptr, int k,
                            long long cs, long long *takes) {
    const long long n = cnt[2];
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i <= cs;
         i += (long long)gridDim.x * blockDim.x) {
        long long t = 0;
        if (i < n) {
            const int64_t v = src[i], d = colptr[v + 1] - colptr[v];
            t = d < k ? d : k;
        }
        takes[i] = t;
    }
}

__global__ void pull(ncclWindow_t win, size_t col_off, const int64_t *src, const long long *cnt,
                     const int64_t *colptr, const int64_t *owner, const long long *takes,
                     const long long *offs, int64_t *hop_node, int64_t *row, int64_t *col,
                     int64_t *edge, int *first) {
    const long long n = cnt[2], e0 = cnt[1];
    const long long warps = (long long)gridDim.x * blockDim.x / 32;
    const int lane = threadIdx.x % 32;
    for (long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32; i < n; i += warps) {
        const int64_t v = src[i], s = colptr[v];
        const int64_t *adj =
            static_cast<const int64_t *>(ncclGetLsaPointer(win, col_off, (int)owner[v]));
        const long long base = offs[i];
        for (long long j = lane; j < takes[i]; j += 32) {
            const int64_t u = adj[s + j];
            const long long e = e0 + base + j;
            hop_node[base + j] = u;
            row[e] = u;
            col[e] = v;
            edge[e] = s + j;
            atomicMin(&first[u], (int)e);
        }
    }
}

__global__ void first_flags(const long long *cnt, const long long *offs, long long cs, long long ce,
                            const int64_t *hop_node, const int *first, char *flags) {
    const long long total = offs[cs], e0 = cnt[1];
    for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < ce;
         t += (long long)gridDim.x * blockDim.x)
        flags[t] = t < total && first[hop_node[t]] == (int)(e0 + t);
}

__global__ void append_nodes(const long long *cnt, const int64_t *src, int64_t *node, int *idx_of) {
    const long long m = cnt[4], n0 = cnt[0];
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < m;
         i += (long long)gridDim.x * blockDim.x) {
        node[n0 + i] = src[i];
        idx_of[src[i]] = (int)(n0 + i);
    }
}

__global__ void advance(long long *cnt, const long long *offs, long long cs) {
    cnt[0] += cnt[4];
    cnt[1] += offs[cs];
    cnt[2] = cnt[4];
}

__global__ void finish(const long long *cnt, const int *idx_of, long long NC, long long EC,
                       int64_t *node, int64_t *row, int64_t *col, int64_t *edge, int64_t *sizes) {
    const long long nn = cnt[0], ne = cnt[1];
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < NC || i < EC;
         i += (long long)gridDim.x * blockDim.x) {
        if (i < EC) {
            if (i < ne) {
                row[i] = idx_of[row[i]];
                col[i] = idx_of[col[i]];
            } else {
                row[i] = 0;
                col[i] = 0;
                edge[i] = 0;
            }
        }
        if (i < NC && i >= nn)
            node[i] = 0;
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        sizes[0] = nn;
        sizes[1] = ne;
    }
}

static size_t up(size_t x) {
    return (x + 255) & ~(size_t)255;
}

extern "C" int solution(const pk_ctx *ctx, const int64_t *seed_nodes,
                        const int64_t *local_adj_row_ptr, const int64_t *local_adj_col,
                        const int64_t *node_to_rank, int64_t *node, int64_t *row, int64_t *col,
                        int64_t *edge, int64_t *sizes, size_t N, size_t S, size_t K1, size_t K2,
                        size_t E, size_t NC, size_t EC) {
    (void)E;
    cudaStream_t st = ctx->stream;
    const long long cs2 = (long long)(S * K1), ce = (long long)(S * K1 * (K2 > 1 ? K2 : 1));
    size_t scan_tmp = 0, sel_tmp = 0;
    if (cub::DeviceScan::ExclusiveSum(NULL, scan_tmp, (long long *)NULL, (long long *)NULL, cs2 + 1,
                                      st) != cudaSuccess ||
        cub::DeviceSelect::Flagged(NULL, sel_tmp, (int64_t *)NULL, (char *)NULL, (int64_t *)NULL,
                                   (long long *)NULL, ce, st) != cudaSuccess)
        return 1;
    const size_t tmp_bytes = up(scan_tmp > sel_tmp ? scan_tmp : sel_tmp);
    const size_t need = 2 * up(N * 4) + up(64) + up(cs2 * 8) + 2 * up((cs2 + 1) * 8) + up(ce * 8) +
                        up(ce) + tmp_bytes;
    if (need > ctx->scratch_size)
        return 2;
    char *p = static_cast<char *>(ctx->scratch);
    auto take = [&p](size_t bytes) {
        char *q = p;
        p += up(bytes);
        return q;
    };
    int *first = (int *)take(N * 4), *idx_of = (int *)take(N * 4);
    long long *cnt = (long long *)take(64);
    int64_t *src = (int64_t *)take(cs2 * 8);
    long long *takes = (long long *)take((cs2 + 1) * 8), *offs = (long long *)take((cs2 + 1) * 8);
    int64_t *hop_node = (int64_t *)take(ce * 8);
    char *flags = take(ce);
    void *tmp = take(tmp_bytes);
    if (cudaMemsetAsync(first, 0x7f, N * 4, st) != cudaSuccess)
        return 3;
    start_call<<<(unsigned)((S + 255) / 256), 256, 0, st>>>(seed_nodes, (long long)S, first, idx_of,
                                                            node, src, cnt);
    lsa_barrier<<<1, 32, 0, st>>>(ctx->dev_comm);
    const size_t col_off = pk_sym_offset(ctx, local_adj_col);
    for (int hop = 0; hop < 2; hop++) {
        const int k = (int)(hop == 0 ? K1 : K2);
        const long long cs = hop == 0 ? (long long)S : cs2, hce = cs * k;
        local_takes<<<(unsigned)((cs + 256) / 256), 256, 0, st>>>(src, cnt, local_adj_row_ptr, k,
                                                                  cs, takes);
        size_t tb = tmp_bytes;
        if (cub::DeviceScan::ExclusiveSum(tmp, tb, takes, offs, cs + 1, st) != cudaSuccess)
            return 4;
        pull<<<528, 256, 0, st>>>(ctx->window, col_off, src, cnt, local_adj_row_ptr, node_to_rank,
                                  takes, offs, hop_node, row, col, edge, first);
        first_flags<<<264, 256, 0, st>>>(cnt, offs, cs, hce, hop_node, first, flags);
        tb = tmp_bytes;
        if (cub::DeviceSelect::Flagged(tmp, tb, hop_node, flags, src, cnt + 4, hce, st) !=
            cudaSuccess)
            return 5;
        append_nodes<<<264, 256, 0, st>>>(cnt, src, node, idx_of);
        advance<<<1, 1, 0, st>>>(cnt, offs, cs);
    }
    finish<<<528, 256, 0, st>>>(cnt, idx_of, (long long)NC, (long long)EC, node, row, col, edge,
                                sizes);
    lsa_barrier<<<1, 32, 0, st>>>(ctx->dev_comm);
    return cudaGetLastError() == cudaSuccess ? 0 : 6;
}
