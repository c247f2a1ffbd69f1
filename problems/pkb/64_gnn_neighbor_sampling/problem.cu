// pkb/64_gnn_neighbor_sampling (ParallelKernelBench problem 64): distributed two-hop neighbour
// sampling for GNN mini-batches (PyG's distributed sampler). The graph is stored in CSC: node v's
// neighbours are local_adj_col[colptr[v] .. colptr[v+1]) (colptr = local_adj_row_ptr, the same on
// every rank); node v is owned by rank node_to_rank[v], and only its owner's local_adj_col holds
// v's list (what the other ranks hold there is garbage). Rank r starts from its S distinct seeds
// and, for each fanout k of (K1, K2), PKB's sampler takes the FIRST min(k, deg v) neighbours of
// every frontier node v (no randomness), in frontier order:
//   out_node = concat over frontier v of  col[colptr[v] + j], j < min(k, deg v)   (from v's owner)
//   out_edge = the same positions colptr[v] + j;  out_dst = v repeated
//   node    <- node followed by the nodes of out_node not seen before, first occurrence order
//   frontier = those new nodes
// starting from node = frontier = seeds. The outputs (PKB's node, row, col, edge):
//   node  = every node reached, seeds first;  row[e] = index in node of out_node[e],
//   col[e] = index in node of out_dst[e],     edge[e] = out_edge[e]  (hops concatenated)
//   sizes = {nodes, edges}; the capacities' tails are zero.
#include "pk_problem_module.h"
#include "pk_splitmix.h"
#include "pk_splits.cuh"

#include <cub/block/block_scan.cuh>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_select.cuh>

#include <vector>

typedef int (*entry_fn)(const pk_ctx *, const int64_t *, const int64_t *, const int64_t *,
                        const int64_t *, int64_t *, int64_t *, int64_t *, int64_t *, int64_t *,
                        size_t, size_t, size_t, size_t, size_t, size_t, size_t);

static int cuda_code(cudaError_t e) {
    return e == cudaSuccess ? 0 : 2000 + (int)e;
}

static int nccl_code(ncclResult_t r) {
    return r == ncclSuccess ? 0 : 1000 + (int)r;
}

// ---------------------------------------------------------------------------------------------
// Inputs. By key % 4, the same graph and owners on every rank (from (seed, key)):
//   0 PKB's: degree 16, v's neighbours (v + 1 .. v + 16) % N, owner v % W, seeds
//     (r S + i) % N, and every rank's local_adj_col holds the whole graph (PKB replicates it);
//   1 skewed degrees (25% isolated nodes, 1..20 mostly short, 1 in 512 a hub of 2048),
//     neighbours uniform, owner v % W;
//   2 the same degrees, neighbours on a power law (n u^4), contiguous owner ranges of skewed
//     sizes (about 30% of the ranks own no node);
//   3 more hubs (1 in 256), half the neighbours drawn to four hub ids, every hub owned by one rank.
// In modes 1-3 each rank's local_adj_col holds its own nodes' lists only: the rest is garbage
// (valid-looking node ids). Modes 1-3 reserve the last 3W nodes as guards: a_r = N - 3W + 3r ->
// a_r + 1 -> a_r + 2 -> a_r, and rank r's first seed is a_r (its other seeds are distinct nodes
// below N - 3W): every rank's two hops sample something, so PKB's solution() (whose ranks must
// agree on the number of hops, or its collectives hang) runs to the end on every rank.
// ---------------------------------------------------------------------------------------------
#define GEN_SALT 0x64677300ULL

static inline int gen_mode(int key) {
    return ((key % 4) + 4) % 4;
}

static inline uint64_t gen_base(uint64_t seed, int key) {
    return pk_splitmix64(seed ^ pk_splitmix64(GEN_SALT + (uint64_t)(unsigned)key));
}

static long long gcd_ll(long long a, long long b) {
    while (b) {
        const long long t = a % b;
        a = b;
        b = t;
    }
    return a;
}

// Host: owners (N), colptr (N + 1) and rank r's seeds (S). E: the adjacency capacity.
static void gen_graph(uint64_t seed, int key, int W, int r, long long N, long long S, long long E,
                      int64_t *owner, int64_t *colptr, int64_t *seeds) {
    const uint64_t base = gen_base(seed, key);
    const int mode = gen_mode(key);
    const long long G = N - 3LL * W; // first guard node
    const uint64_t hd = pk_splitmix64(base ^ 0xd3ULL);
    const long long hub_every = mode == 3 ? 256 : 512;
    long long ranges[PK_MAX_RANKS] = {0};
    if (mode == 2) {
        double w[PK_MAX_RANKS];
        for (int d = 0; d < W; d++)
            w[d] = pk_splitmix_unit(base + 100 + (uint64_t)d) < 0.3
                       ? 0.0
                       : exp(3.0 * pk_splitmix_unit(base + 200 + (uint64_t)d));
        w[(int)(pk_splitmix64(base + 3) % (uint64_t)W)] += 1.0;
        pk_splits_apportion(N, w, W, ranges);
    }
    const int hot = (int)(pk_splitmix64(base + 1) % (uint64_t)W);
    long long d_rank = 0, d_left = ranges[0];
    colptr[0] = 0;
    for (long long v = 0; v < N; v++) {
        long long deg;
        bool hub = false;
        if (mode == 0) {
            deg = 16;
        } else if (v >= G) {
            deg = 1;
        } else {
            const uint64_t h = pk_splitmix64(hd + (uint64_t)v);
            const double u = (double)(h >> 11) * (1.0 / 9007199254740992.0);
            hub = (long long)((h >> 20) % (uint64_t)hub_every) == 0;
            if (u < 0.25)
                deg = 0, hub = false;
            else if (hub)
                deg = 2048;
            else {
                const double u2 = pk_splitmix_unit(h);
                deg = 1 + (long long)(20.0 * u2 * u2 * u2);
            }
            if (colptr[v] + deg > E - 3LL * W) // never past the capacity (the guards' 3W kept)
                deg = 0, hub = false;
        }
        colptr[v + 1] = colptr[v] + deg;
        if (mode == 2) {
            while (d_left == 0 && d_rank < W - 1)
                d_left = ranges[++d_rank];
            owner[v] = d_rank;
            d_left--;
        } else if (mode == 3 && hub) {
            owner[v] = hot;
        } else {
            owner[v] = v % W;
        }
    }
    if (mode == 0) {
        for (long long i = 0; i < S; i++)
            seeds[i] = ((long long)r * S + i) % N;
        return;
    }
    seeds[0] = G + 3LL * r;
    const long long off = (long long)(pk_splitmix64(base + 300 + (uint64_t)r) % (uint64_t)G);
    long long stride = 1 + (long long)(pk_splitmix64(base + 400 + (uint64_t)r) % (uint64_t)(G - 1));
    while (gcd_ll(stride, G) != 1)
        stride = stride % (G - 1) + 1;
    for (long long i = 1; i < S; i++)
        seeds[i] = (off + (i - 1) * stride) % G;
}

// Entry e of rank r's local_adj_col: position e - s of node v's list when r holds it (mine),
// garbage otherwise (host and device: bench/pkb/gen_64_graph_check.cu runs it on the host).
static inline PK_HD long long col_value(long long v, long long s, long long e, bool mine,
                                        uint64_t nbase, uint64_t jbase, int mode, int W,
                                        long long N) {
    const long long G = N - 3LL * W;
    if (!mine)
        return (long long)(pk_splitmix64(jbase + (uint64_t)e) % (uint64_t)N);
    if (mode == 0)
        return (v + 1 + (e - s)) % N;
    if (v >= G)
        return G + 3 * ((v - G) / 3) + ((v - G) % 3 + 1) % 3;
    return pk_skewed_id(
        pk_splitmix64(nbase + (uint64_t)e),
        mode == 1 ? PK_DEGREE_UNIFORM : (mode == 2 ? PK_DEGREE_POWER : PK_DEGREE_HUBS), N);
}

// local_adj_col of rank r (E entries): the lists of the nodes r owns (all of them in mode 0),
// garbage elsewhere, the tail past colptr[N] included.
__global__ void fill_col(const int64_t *colptr, const int64_t *owner, uint64_t nbase,
                         uint64_t jbase, int mode, int r, int W, long long N, long long E,
                         int64_t *col) {
    const long long used = colptr[N];
    for (long long e = used + (long long)blockIdx.x * blockDim.x + threadIdx.x; e < E;
         e += (long long)gridDim.x * blockDim.x) // the tail: garbage
        col[e] = col_value(N, used, e, false, nbase, jbase, mode, W, N);
    for (long long v = (long long)blockIdx.x * blockDim.x + threadIdx.x; v < N;
         v += (long long)gridDim.x * blockDim.x) {
        const long long s = colptr[v], t = colptr[v + 1];
        const bool mine = mode == 0 || owner[v] == r;
        for (long long e = s; e < t; e++)
            col[e] = col_value(v, s, e, mine, nbase, jbase, mode, W, N);
    }
}

static std::vector<int64_t> g_gen; // host staging for generate(), reused

static int generate(const pk_problem_call *call, uint64_t seed, int key) {
    const pk_ctx *ctx = call->ctx;
    const int W = ctx->world_size, r = ctx->rank;
    const long long N = call->dims[0], S = call->dims[1], E = call->dims[5];
    if (N < 3LL * W + S + 2 || E < 16 * N)
        return 3100;
    g_gen.resize((size_t)(2 * N + 1 + S));
    int64_t *owner = g_gen.data(), *colptr = owner + N, *seeds = colptr + N + 1;
    gen_graph(seed, key, W, r, N, S, E, owner, colptr, seeds);
    cudaStream_t s = ctx->stream;
    int rc = cuda_code(
        cudaMemcpyAsync(call->args[0], seeds, S * sizeof(int64_t), cudaMemcpyHostToDevice, s));
    if (!rc)
        rc = cuda_code(cudaMemcpyAsync(call->args[1], colptr, (N + 1) * sizeof(int64_t),
                                       cudaMemcpyHostToDevice, s));
    if (!rc)
        rc = cuda_code(
            cudaMemcpyAsync(call->args[3], owner, N * sizeof(int64_t), cudaMemcpyHostToDevice, s));
    if (rc)
        return rc;
    const uint64_t base = gen_base(seed, key);
    fill_col<<<264, 128, 0, s>>>(
        static_cast<const int64_t *>(call->args[1]), static_cast<const int64_t *>(call->args[3]),
        pk_splitmix64(base ^ 0x6e62ULL), pk_splitmix64(base ^ (0x6a756e6bULL + (uint64_t)r)),
        gen_mode(key), r, W, N, E, static_cast<int64_t *>(call->args[2]));
    rc = cuda_code(cudaGetLastError());
    if (!rc) // the staging vector is reused by the next call
        rc = cuda_code(cudaStreamSynchronize(s));
    return rc;
}

// ---------------------------------------------------------------------------------------------
// The reference: PKB's steps with host-driven NCCL, one hop after the other, no overlap.
// Per hop: the frontier partitioned by owner (stable), the counts exchanged and read on the host
// (one synchronisation: PKB's .tolist() of its counts), the nodes exchanged (PKB's
// all_to_all_single), the owners sample the first min(k, deg) neighbours into k slots per node
// and send back the slots and the counts (PKB's replies; fixed k slots spare PKB's second count
// exchange and its synchronisation), then the requester lays the samples out in frontier order
// (a scan of the counts), marks every node's first occurrence (atomicMin of its position over a
// per-node table) and compacts the first occurrences into the next frontier (CUB's stable
// DeviceSelect::Flagged: PKB's np.unique(return_index) and sort). At the end every sampled node
// and destination is relabelled through the node -> index table.
// ---------------------------------------------------------------------------------------------
#define BLK 1024

static struct {
    char *buf; // NCCL buffers (ncclMemAlloc, one registered window)
    size_t bytes;
    ncclWindow_t win;
    char *work; // the rest (cudaMalloc)
    size_t work_bytes;
    long long *host; // pinned: counts sent and received
} g_ref;

static int init(const pk_ctx *ctx) {
    (void)ctx;
    if (g_ref.host)
        return 0;
    return cuda_code(cudaMallocHost((void **)&g_ref.host, 4 * PK_MAX_RANKS * sizeof(long long)));
}

static void fini(const pk_ctx *ctx) {
    if (g_ref.buf) {
        ncclCommWindowDeregister(ctx->comm, g_ref.win);
        ncclMemFree(g_ref.buf);
    }
    if (g_ref.work)
        cudaFree(g_ref.work);
    if (g_ref.host)
        cudaFreeHost(g_ref.host);
    g_ref = {};
}

// Per call: first[] = "unseen" (0x7f7f7f7f, above every position); the seeds: position -1,
// index i, node[i], the first frontier; counters {nodes, edges, frontier, -, selected}.
__global__ void start_call(const int64_t *seeds, long long S, int *first, int *idx_of,
                           int64_t *node, int64_t *src, long long *cnt) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < S;
         i += (long long)gridDim.x * blockDim.x) {
        const int64_t u = seeds[i];
        first[u] = -1;
        idx_of[u] = (int)i;
        node[i] = u;
        src[i] = u;
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        cnt[0] = S;
        cnt[1] = 0;
        cnt[2] = S;
    }
}

// The frontier grouped by owner, each group in frontier order; slot[i]: where src[i] went.
__global__ void __launch_bounds__(BLK)
    partition(const int64_t *src, const long long *cnt, const int64_t *owner, int W, int64_t *send,
              long long *slot, long long *send_counts) {
    typedef cub::BlockScan<int, BLK> Scan;
    __shared__ typename Scan::TempStorage tmp;
    __shared__ unsigned long long c[PK_MAX_RANKS];
    __shared__ long long off[PK_MAX_RANKS];
    const long long n = cnt[2];
    if (threadIdx.x < W)
        c[threadIdx.x] = 0;
    __syncthreads();
    for (long long i = threadIdx.x; i < n; i += BLK)
        atomicAdd(&c[owner[src[i]]], 1ULL);
    __syncthreads();
    if (threadIdx.x == 0) {
        long long a = 0;
        for (int q = 0; q < W; q++) {
            off[q] = a;
            send_counts[q] = (long long)c[q];
            a += (long long)c[q];
        }
    }
    __syncthreads();
    for (long long b = 0; b < n; b += BLK) {
        const long long i = b + threadIdx.x;
        const int o = i < n ? (int)owner[src[i]] : -1;
        for (int q = 0; q < W; q++) {
            int p, tot;
            Scan(tmp).ExclusiveSum(o == q ? 1 : 0, p, tot);
            if (o == q) {
                const long long s = off[q] + p;
                send[s] = src[i];
                slot[i] = s;
            }
            __syncthreads();
            if (threadIdx.x == 0)
                off[q] += tot;
            __syncthreads();
        }
    }
}

// The owner's sampler: the first min(k, deg v) neighbours of each received node, in k slots.
__global__ void sample_owned(const int64_t *rnodes, long long R, int k, const int64_t *colptr,
                             const int64_t *col, long long *rtake, int64_t *rnode, int64_t *redge) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < R;
         i += (long long)gridDim.x * blockDim.x) {
        const int64_t v = rnodes[i], s = colptr[v], d = colptr[v + 1] - s;
        const long long take = d < k ? d : k;
        rtake[i] = take;
        for (long long j = 0; j < take; j++) {
            rnode[i * k + j] = col[s + j];
            redge[i * k + j] = s + j;
        }
    }
}

// takes[i] = the samples of frontier node i (0 past the frontier, takes[CS] = 0 for the total).
__global__ void gather_takes(const long long *cnt, const long long *slot, const long long *btake,
                             long long CS, long long *takes) {
    const long long n = cnt[2];
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i <= CS;
         i += (long long)gridDim.x * blockDim.x)
        takes[i] = i < n ? btake[slot[i]] : 0;
}

// One warp per frontier node: its samples to hop_node / row (node ids for now) / col (the
// destination) / edge at this hop's offsets, and each sampled node's first position.
__global__ void emit(const int64_t *src, const long long *cnt, const long long *slot,
                     const long long *takes, const long long *offs, const int64_t *bnode,
                     const int64_t *bedge, int k, int64_t *hop_node, int64_t *row, int64_t *col,
                     int64_t *edge, int *first) {
    const long long n = cnt[2], e0 = cnt[1];
    const long long warps = (long long)gridDim.x * blockDim.x / 32;
    const int lane = threadIdx.x % 32;
    for (long long i = ((long long)blockIdx.x * blockDim.x + threadIdx.x) / 32; i < n; i += warps) {
        const long long s = slot[i], base = offs[i];
        for (long long j = lane; j < takes[i]; j += 32) {
            const int64_t u = bnode[s * k + j];
            const long long e = e0 + base + j;
            hop_node[base + j] = u;
            row[e] = u;
            col[e] = src[i];
            edge[e] = bedge[s * k + j];
            atomicMin(&first[u], (int)e);
        }
    }
}

// flags[t]: hop sample t is its node's first occurrence (over the seeds and all hops so far).
__global__ void first_flags(const long long *cnt, const long long *offs, long long CS, long long CE,
                            const int64_t *hop_node, const int *first, char *flags) {
    const long long total = offs[CS], e0 = cnt[1];
    for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < CE;
         t += (long long)gridDim.x * blockDim.x)
        flags[t] = t < total && first[hop_node[t]] == (int)(e0 + t);
}

// The new nodes (the next frontier, in src) appended to node, their indices recorded.
__global__ void append_nodes(const long long *cnt, const int64_t *src, int64_t *node, int *idx_of) {
    const long long m = cnt[4], n0 = cnt[0];
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < m;
         i += (long long)gridDim.x * blockDim.x) {
        node[n0 + i] = src[i];
        idx_of[src[i]] = (int)(n0 + i);
    }
}

__global__ void advance(long long *cnt, const long long *offs, long long CS) {
    cnt[0] += cnt[4];
    cnt[1] += offs[CS];
    cnt[2] = cnt[4];
}

// row / col relabelled, tails zeroed, sizes written.
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

static size_t align_up(size_t x) {
    return (x + 255) & ~(size_t)255;
}

static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const int W = ctx->world_size;
    const long long N = call->dims[0], S = call->dims[1], K1 = call->dims[3], K2 = call->dims[4],
                    NC = call->dims[6], EC = call->dims[7];
    const int64_t *seeds = static_cast<const int64_t *>(call->args[0]);
    const int64_t *colptr = static_cast<const int64_t *>(call->args[1]);
    const int64_t *adj = static_cast<const int64_t *>(call->args[2]);
    const int64_t *owner = static_cast<const int64_t *>(call->args[3]);
    int64_t *node = static_cast<int64_t *>(call->args[4]),
            *row = static_cast<int64_t *>(call->args[5]),
            *col = static_cast<int64_t *>(call->args[6]),
            *edge = static_cast<int64_t *>(call->args[7]),
            *sizes = static_cast<int64_t *>(call->args[8]);
    cudaStream_t s = ctx->stream;
    if (K1 < 1 || K2 < 1 || K1 > 1024 || K2 > 1024)
        return 3200;
    const long long CS = S * K1, CE = S * K1 * (K2 > 1 ? K2 : 1);
    int rc = init(ctx);
    // NCCL block: send / recv counts (W each), send nodes (CS), received nodes (W CS), the
    // owner's replies (takes W CS, nodes and edges W CE each), the replies back (CS, CE, CE).
    const size_t nb = align_up(2 * PK_MAX_RANKS * 8) + align_up(CS * 8) + 2 * align_up(W * CS * 8) +
                      2 * align_up(W * CE * 8) + align_up(CS * 8) + 2 * align_up(CE * 8);
    if (!rc && g_ref.bytes < nb) {
        if (g_ref.buf) {
            ncclCommWindowDeregister(ctx->comm, g_ref.win);
            ncclMemFree(g_ref.buf);
            g_ref.buf = NULL;
            g_ref.bytes = 0;
        }
        rc = nccl_code(ncclMemAlloc((void **)&g_ref.buf, nb));
        if (!rc)
            rc = nccl_code(ncclCommWindowRegister(ctx->comm, g_ref.buf, nb, &g_ref.win,
                                                  NCCL_WIN_COLL_SYMMETRIC));
        if (!rc)
            g_ref.bytes = nb;
    }
    size_t scan_tmp = 0, sel_tmp = 0;
    if (!rc)
        rc = cuda_code(cub::DeviceScan::ExclusiveSum(NULL, scan_tmp, (long long *)NULL,
                                                     (long long *)NULL, CS + 1, s));
    if (!rc)
        rc = cuda_code(cub::DeviceSelect::Flagged(NULL, sel_tmp, (int64_t *)NULL, (char *)NULL,
                                                  (int64_t *)NULL, (long long *)NULL, CE, s));
    const size_t tmp_bytes = align_up(scan_tmp > sel_tmp ? scan_tmp : sel_tmp);
    // work: first, idx_of (N ints each), counters (8), frontier (CS), slots (CS), takes and
    // offsets (CS + 1 each), this hop's samples (CE), flags (CE), CUB's temporary storage.
    const size_t wb = 2 * align_up(N * 4) + align_up(64) + 2 * align_up(CS * 8) +
                      2 * align_up((CS + 1) * 8) + align_up(CE * 8) + align_up(CE) + tmp_bytes;
    if (!rc && g_ref.work_bytes < wb) {
        if (g_ref.work)
            cudaFree(g_ref.work);
        g_ref.work = NULL;
        g_ref.work_bytes = 0;
        rc = cuda_code(cudaMalloc((void **)&g_ref.work, wb));
        if (!rc)
            g_ref.work_bytes = wb;
    }
    if (rc)
        return rc;
    char *p = g_ref.buf;
    auto take = [&p](size_t bytes) {
        char *q = p;
        p += align_up(bytes);
        return q;
    };
    long long *scnt = (long long *)take(2 * PK_MAX_RANKS * 8), *rcnt = scnt + PK_MAX_RANKS;
    int64_t *send = (int64_t *)take(CS * 8), *rnodes = (int64_t *)take(W * CS * 8);
    long long *rtake = (long long *)take(W * CS * 8);
    int64_t *rnode = (int64_t *)take(W * CE * 8), *redge = (int64_t *)take(W * CE * 8);
    long long *btake = (long long *)take(CS * 8);
    int64_t *bnode = (int64_t *)take(CE * 8), *bedge = (int64_t *)take(CE * 8);
    p = g_ref.work;
    int *first = (int *)take(N * 4), *idx_of = (int *)take(N * 4);
    long long *cnt = (long long *)take(64);
    int64_t *src = (int64_t *)take(CS * 8);
    long long *slot = (long long *)take(CS * 8), *takes = (long long *)take((CS + 1) * 8),
              *offs = (long long *)take((CS + 1) * 8);
    int64_t *hop_node = (int64_t *)take(CE * 8);
    char *flags = take(CE);
    void *tmp = take(tmp_bytes);

    rc = cuda_code(cudaMemsetAsync(first, 0x7f, N * 4, s));
    if (rc)
        return rc;
    start_call<<<(unsigned)((S + 255) / 256), 256, 0, s>>>(seeds, S, first, idx_of, node, src, cnt);
    long long *h = g_ref.host;
    for (int hop = 0; hop < 2 && !rc; hop++) {
        const int k = (int)(hop == 0 ? K1 : K2);
        const long long cs = hop == 0 ? S : CS, ce = cs * k; // this hop's capacities
        partition<<<1, BLK, 0, s>>>(src, cnt, owner, W, send, slot, scnt);
        rc = nccl_code(ncclGroupStart());
        for (int q = 0; q < W && !rc; q++) {
            rc = nccl_code(ncclSend(scnt + q, 1, ncclInt64, q, ctx->comm, s));
            if (!rc)
                rc = nccl_code(ncclRecv(rcnt + q, 1, ncclInt64, q, ctx->comm, s));
        }
        int end = nccl_code(ncclGroupEnd());
        rc = rc ? rc : end;
        if (!rc)
            rc = cuda_code(cudaMemcpyAsync(h, scnt, 2 * PK_MAX_RANKS * sizeof(long long),
                                           cudaMemcpyDeviceToHost, s));
        if (!rc)
            rc = cuda_code(cudaStreamSynchronize(s));
        if (rc)
            break;
        long long so[PK_MAX_RANKS + 1] = {0}, ro[PK_MAX_RANKS + 1] = {0};
        for (int q = 0; q < W; q++) {
            so[q + 1] = so[q] + h[q];
            ro[q + 1] = ro[q] + h[PK_MAX_RANKS + q];
        }
        if (so[W] > cs || ro[W] > W * cs)
            return 3201; // not this problem's inputs
        rc = nccl_code(ncclGroupStart());
        for (int q = 0; q < W && !rc; q++) {
            if (h[q] > 0)
                rc = nccl_code(ncclSend(send + so[q], (size_t)h[q], ncclInt64, q, ctx->comm, s));
            if (!rc && h[PK_MAX_RANKS + q] > 0)
                rc = nccl_code(ncclRecv(rnodes + ro[q], (size_t)h[PK_MAX_RANKS + q], ncclInt64, q,
                                        ctx->comm, s));
        }
        end = nccl_code(ncclGroupEnd());
        rc = rc ? rc : end;
        if (!rc && ro[W] > 0) {
            sample_owned<<<(unsigned)((ro[W] + 255) / 256), 256, 0, s>>>(rnodes, ro[W], k, colptr,
                                                                         adj, rtake, rnode, redge);
            rc = cuda_code(cudaGetLastError());
        }
        if (!rc)
            rc = nccl_code(ncclGroupStart());
        for (int q = 0; q < W && !rc; q++) {
            const long long rq = h[PK_MAX_RANKS + q], sq = h[q];
            if (rq > 0) {
                rc = nccl_code(ncclSend(rtake + ro[q], (size_t)rq, ncclInt64, q, ctx->comm, s));
                if (!rc)
                    rc = nccl_code(
                        ncclSend(rnode + ro[q] * k, (size_t)(rq * k), ncclInt64, q, ctx->comm, s));
                if (!rc)
                    rc = nccl_code(
                        ncclSend(redge + ro[q] * k, (size_t)(rq * k), ncclInt64, q, ctx->comm, s));
            }
            if (!rc && sq > 0) {
                rc = nccl_code(ncclRecv(btake + so[q], (size_t)sq, ncclInt64, q, ctx->comm, s));
                if (!rc)
                    rc = nccl_code(
                        ncclRecv(bnode + so[q] * k, (size_t)(sq * k), ncclInt64, q, ctx->comm, s));
                if (!rc)
                    rc = nccl_code(
                        ncclRecv(bedge + so[q] * k, (size_t)(sq * k), ncclInt64, q, ctx->comm, s));
            }
        }
        end = nccl_code(ncclGroupEnd());
        rc = rc ? rc : end;
        if (rc)
            break;
        gather_takes<<<(unsigned)((cs + 256) / 256), 256, 0, s>>>(cnt, slot, btake, cs, takes);
        size_t tb = tmp_bytes;
        rc = cuda_code(cub::DeviceScan::ExclusiveSum(tmp, tb, takes, offs, cs + 1, s));
        if (rc)
            break;
        emit<<<264, 256, 0, s>>>(src, cnt, slot, takes, offs, bnode, bedge, k, hop_node, row, col,
                                 edge, first);
        first_flags<<<264, 256, 0, s>>>(cnt, offs, cs, ce, hop_node, first, flags);
        tb = tmp_bytes;
        rc = cuda_code(cub::DeviceSelect::Flagged(tmp, tb, hop_node, flags, src, cnt + 4, ce, s));
        if (rc)
            break;
        append_nodes<<<264, 256, 0, s>>>(cnt, src, node, idx_of);
        advance<<<1, 1, 0, s>>>(cnt, offs, cs);
        rc = cuda_code(cudaGetLastError());
    }
    if (rc)
        return rc;
    finish<<<528, 256, 0, s>>>(cnt, idx_of, NC, EC, node, row, col, edge, sizes);
    return cuda_code(cudaGetLastError());
}

static int invoke(void *fn, const pk_problem_call *c) {
    if (!fn || c->n_args != 9 || c->n_dims < 8)
        return -1;
    return reinterpret_cast<entry_fn>(fn)(
        c->ctx, static_cast<const int64_t *>(c->args[0]), static_cast<const int64_t *>(c->args[1]),
        static_cast<const int64_t *>(c->args[2]), static_cast<const int64_t *>(c->args[3]),
        static_cast<int64_t *>(c->args[4]), static_cast<int64_t *>(c->args[5]),
        static_cast<int64_t *>(c->args[6]), static_cast<int64_t *>(c->args[7]),
        static_cast<int64_t *>(c->args[8]), (size_t)c->dims[0], (size_t)c->dims[1],
        (size_t)c->dims[3], (size_t)c->dims[4], (size_t)c->dims[5], (size_t)c->dims[6],
        (size_t)c->dims[7]);
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, invoke, generate, init, fini, NULL};
    return &module;
}
