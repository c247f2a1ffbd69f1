// pkb/70_torchrec_kjt_all2all (ParallelKernelBench problem 70): TorchRec's KeyedJaggedTensor
// all-to-all, the input distribution of sharded embedding tables. Every rank holds a jagged
// batch: F features x B samples, each (feature, sample) a list of ids of its own length (zero
// included). Features are sharded by key_splits (the same on every rank): rank d owns the
// key_splits[d] features from key_off[d] = key_splits[0] + ... + key_splits[d-1]. Every rank
// sends each owner the lengths and ids of its features; the owner lays them out feature-major,
// then by source rank (TorchRec's recat). With K = key_splits[r], g = key_off[r] + f and
// voff_q(g) = lengths_q[0] + ... + lengths_q[g B - 1] (where feature g's ids start in values_q):
//   out_lengths_r[(f W + q) B + b] = lengths_q[g B + b]                 f < K, q < W, b < B
//   out_values_r                   = concat over (f, q) in that order of
//                                    values_q[voff_q(g) .. voff_q(g + 1))
//   out_sizes_r = {K W B, the number of ids received}; the capacities' tails are zero.
#include "pk_problem_module.h"
#include "pk_splitmix.h"
#include "pk_splits.cuh"

typedef int (*entry_fn)(const pk_ctx *, const int64_t *, const int64_t *, const int64_t *,
                        int64_t *, int64_t *, int64_t *, size_t, size_t, size_t, size_t, size_t);

static int cuda_code(cudaError_t e) {
    return e == cudaSuccess ? 0 : 2000 + (int)e;
}

static int nccl_code(ncclResult_t r) {
    return r == ncclSuccess ? 0 : 1000 + (int)r;
}

#define MAX_F 1024 // features (the per-feature sums travel through pinned memory)

// The reference's buffers, made in the first reference call (a correctness trial: window
// registration is collective) and grown with the dims: one ncclMemAlloc'ed block registered as
// a window (NCCL 2.28 can hang between registered and plain memory, docs/problems.md, known
// issues) holding the metadata sent and received (3 x W each), the received lengths and ids in
// source order, and the received rows' sums and offsets; pinned host memory for the sums.
static struct {
    char *buf;
    size_t bytes;
    ncclWindow_t win;
    int64_t *host; // pinned, HOST_LEN: the layout is in reference()
} g_ref;

#define HOST_LEN (10 * MAX_F + 64)

static int init(const pk_ctx *ctx) {
    (void)ctx;
    if (g_ref.host)
        return 0;
    return cuda_code(cudaMallocHost((void **)&g_ref.host, HOST_LEN * sizeof(int64_t)));
}

static void fini(const pk_ctx *ctx) {
    if (g_ref.buf) {
        ncclCommWindowDeregister(ctx->comm, g_ref.win);
        ncclMemFree(g_ref.buf);
    }
    if (g_ref.host)
        cudaFreeHost(g_ref.host);
    g_ref = {};
}

// sums[row] = lengths[row * B] + ... + lengths[row * B + B - 1], one CTA per row (PKB's
// _lengths_per_key over the features here, over the received rows in the permutation).
__global__ void row_sums(const int64_t *lengths, long long B, int64_t *sums) {
    __shared__ long long part[256];
    long long s = 0;
    for (long long b = threadIdx.x; b < B; b += blockDim.x)
        s += lengths[blockIdx.x * B + b];
    part[threadIdx.x] = s;
    __syncthreads();
    for (int w = 128; w > 0; w >>= 1) {
        if (threadIdx.x < w)
            part[threadIdx.x] += part[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        sums[blockIdx.x] = part[0];
}

// TorchRec's recat of the received rows: row (q, f) of the receive buffers (source-major, as
// they arrive) becomes row (f, q) of the output. One CTA per (row, chunk): blockIdx.y the output
// row f W + q; src_off / dst_off the rows' first ids (exclusive prefixes of the row sums in
// receive and output order, computed on the host).
__global__ void recat_rows(const int64_t *rlen, const int64_t *rval, const long long *src_off,
                           const long long *dst_off, const long long *seg, int K, int W,
                           long long B, int64_t *olen, int64_t *oval) {
    const int orow = blockIdx.y, f = orow / W, q = orow % W, irow = q * K + f;
    for (long long b = (long long)blockIdx.x * blockDim.x + threadIdx.x; b < B;
         b += (long long)gridDim.x * blockDim.x)
        olen[(long long)orow * B + b] = rlen[(long long)irow * B + b];
    for (long long j = (long long)blockIdx.x * blockDim.x + threadIdx.x; j < seg[irow];
         j += (long long)gridDim.x * blockDim.x)
        oval[dst_off[orow] + j] = rval[src_off[irow] + j];
}

// Baseline, PKB's steps: the ids per feature (PKB's _lengths_per_key, .item() per feature: here
// one kernel and one copy), the key splits and the sums to the host and a synchronisation, the
// metadata (length split, value split, batch size per destination) exchanged by an NCCL group
// and read back (PKB's meta all_to_all_single and .tolist()), one NCCL group of send/recv of the
// lengths and the ids (PKB's two all_to_all_single; this rank's own part by device copies), then
// the received rows' sums to the host (PKB's _permute_segments reads its offsets with .item()),
// the recat permutation kernel, the tails zeroed and the sizes written. No overlap.
static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const int W = ctx->world_size, r = ctx->rank;
    const long long F = call->dims[0], B = call->dims[1], L = call->dims[2], NL = call->dims[4],
                    NV = call->dims[5];
    const int64_t *lengths = static_cast<const int64_t *>(call->args[0]);
    const int64_t *values = static_cast<const int64_t *>(call->args[1]);
    int64_t *olen = static_cast<int64_t *>(call->args[3]);
    int64_t *oval = static_cast<int64_t *>(call->args[4]);
    int64_t *osizes = static_cast<int64_t *>(call->args[5]);
    cudaStream_t s = ctx->stream;
    const long long rows = NL / B; // output rows at most (K W)
    if (F > MAX_F || rows > 2 * MAX_F)
        return 3002;
    int rc = init(ctx);
    // block: meta out (3W), meta in (3W), per-feature sums (F), per-row sums, src/dst offsets
    // and segment sizes (3 x NL / B rows each), received lengths (NL), received ids (NV)
    const long long n_meta = 6 * PK_MAX_RANKS + F + 4 * rows;
    const size_t bytes = (size_t)(n_meta + NL + NV) * sizeof(int64_t);
    if (!rc && g_ref.bytes < bytes) {
        if (g_ref.buf) {
            ncclCommWindowDeregister(ctx->comm, g_ref.win);
            ncclMemFree(g_ref.buf);
            g_ref.buf = NULL;
            g_ref.bytes = 0;
        }
        rc = nccl_code(ncclMemAlloc((void **)&g_ref.buf, bytes));
        if (!rc)
            rc = nccl_code(ncclCommWindowRegister(ctx->comm, g_ref.buf, bytes, &g_ref.win,
                                                  NCCL_WIN_COLL_SYMMETRIC));
        if (!rc)
            g_ref.bytes = bytes;
    }
    if (rc)
        return rc;
    int64_t *meta_out = reinterpret_cast<int64_t *>(g_ref.buf),
            *meta_in = meta_out + 3 * PK_MAX_RANKS;
    int64_t *feat = meta_in + 3 * PK_MAX_RANKS, *rsum = feat + F;
    long long *src_off = reinterpret_cast<long long *>(rsum + rows), *dst_off = src_off + rows,
              *seg = dst_off + rows;
    int64_t *rlen = reinterpret_cast<int64_t *>(seg + rows), *rval = rlen + NL;
    // pinned host: key splits (8), ids per feature (MAX_F), metadata out and in (24 each), the
    // sizes (8), the received rows' sums (2 MAX_F), their offsets and sizes (6 MAX_F)
    int64_t *h = g_ref.host, *hfeat = h + PK_MAX_RANKS, *hmeta = hfeat + MAX_F;
    int64_t *hin = hmeta + 3 * PK_MAX_RANKS, *hsizes = hin + 3 * PK_MAX_RANKS;
    int64_t *hs = hsizes + 8;
    long long *hoff = reinterpret_cast<long long *>(hs + 2 * MAX_F);
    row_sums<<<(unsigned)F, 256, 0, s>>>(lengths, B, feat);
    rc = cuda_code(cudaGetLastError());
    if (!rc)
        rc = cuda_code(
            cudaMemcpyAsync(h, call->args[2], W * sizeof(int64_t), cudaMemcpyDeviceToHost, s));
    if (!rc)
        rc =
            cuda_code(cudaMemcpyAsync(hfeat, feat, F * sizeof(int64_t), cudaMemcpyDeviceToHost, s));
    if (!rc)
        rc = cuda_code(cudaStreamSynchronize(s));
    if (rc)
        return rc;
    long long key_off[PK_MAX_RANKS + 1] = {0}, voff[PK_MAX_RANKS + 1] = {0};
    for (int d = 0; d < W; d++) {
        if (h[d] < 0)
            return 3000;
        key_off[d + 1] = key_off[d] + h[d];
        long long v = 0;
        for (long long g = key_off[d]; g < key_off[d + 1] && g < F; g++)
            v += hfeat[g];
        voff[d + 1] = voff[d] + v;
    }
    const long long K = h[r];
    if (key_off[W] != F || voff[W] > F * B * L || K * W * B > NL)
        return 3001;              // not this problem's inputs
    for (int d = 0; d < W; d++) { // PKB's meta_input: length split, value split, batch size
        hmeta[3 * d] = h[d] * B;
        hmeta[3 * d + 1] = voff[d + 1] - voff[d];
        hmeta[3 * d + 2] = B;
    }
    rc = cuda_code(
        cudaMemcpyAsync(meta_out, hmeta, 3 * W * sizeof(int64_t), cudaMemcpyHostToDevice, s));
    if (!rc) {
        rc = nccl_code(ncclGroupStart());
        for (int q = 0; q < W && !rc; q++) {
            rc = nccl_code(ncclSend(meta_out + 3 * q, 3, ncclInt64, q, ctx->comm, s));
            if (!rc)
                rc = nccl_code(ncclRecv(meta_in + 3 * q, 3, ncclInt64, q, ctx->comm, s));
        }
        const int end = nccl_code(ncclGroupEnd());
        rc = rc ? rc : end;
    }
    if (!rc)
        rc = cuda_code(
            cudaMemcpyAsync(hin, meta_in, 3 * W * sizeof(int64_t), cudaMemcpyDeviceToHost, s));
    if (!rc)
        rc = cuda_code(cudaStreamSynchronize(s));
    if (rc)
        return rc;
    long long lin[PK_MAX_RANKS + 1] = {0}, vin[PK_MAX_RANKS + 1] = {0};
    for (int q = 0; q < W; q++) {
        if (hin[3 * q] != K * B || hin[3 * q + 1] < 0)
            return 3003;
        lin[q + 1] = lin[q] + hin[3 * q];
        vin[q + 1] = vin[q] + hin[3 * q + 1];
    }
    const long long total = vin[W];
    if (total > NV)
        return 3004;
    if (K > 0 && h[r] * B > 0) // own part
        rc = cuda_code(cudaMemcpyAsync(rlen + lin[r], lengths + key_off[r] * B,
                                       K * B * sizeof(int64_t), cudaMemcpyDeviceToDevice, s));
    if (!rc && vin[r + 1] > vin[r])
        rc = cuda_code(cudaMemcpyAsync(rval + vin[r], values + voff[r],
                                       (vin[r + 1] - vin[r]) * sizeof(int64_t),
                                       cudaMemcpyDeviceToDevice, s));
    if (rc)
        return rc;
    rc = nccl_code(ncclGroupStart());
    for (int k = 1; k < W && !rc; k++) {
        const int q = (r + k) % W;
        if (h[q] > 0)
            rc = nccl_code(
                ncclSend(lengths + key_off[q] * B, (size_t)(h[q] * B), ncclInt64, q, ctx->comm, s));
        if (!rc && voff[q + 1] > voff[q])
            rc = nccl_code(ncclSend(values + voff[q], (size_t)(voff[q + 1] - voff[q]), ncclInt64, q,
                                    ctx->comm, s));
        if (!rc && K > 0)
            rc = nccl_code(ncclRecv(rlen + lin[q], (size_t)(K * B), ncclInt64, q, ctx->comm, s));
        if (!rc && vin[q + 1] > vin[q])
            rc = nccl_code(
                ncclRecv(rval + vin[q], (size_t)(vin[q + 1] - vin[q]), ncclInt64, q, ctx->comm, s));
    }
    const int end = nccl_code(ncclGroupEnd());
    if (rc || end)
        return rc ? rc : end;
    const long long nrows = K * W; // the received rows, (q, f) source-major
    if (nrows > 0) {
        row_sums<<<(unsigned)nrows, 256, 0, s>>>(rlen, B, rsum);
        rc = cuda_code(cudaGetLastError());
        if (!rc)
            rc = cuda_code(
                cudaMemcpyAsync(hs, rsum, nrows * sizeof(int64_t), cudaMemcpyDeviceToHost, s));
        if (!rc)
            rc = cuda_code(cudaStreamSynchronize(s));
        if (rc)
            return rc;
        long long acc = 0;
        for (long long i = 0; i < nrows; i++) { // source order
            hoff[i] = acc;
            acc += hs[i];
        }
        acc = 0;
        for (long long o = 0; o < nrows; o++) { // output order (f, q)
            hoff[rows + o] = acc;
            acc += hs[(o % W) * K + o / W];
        }
        for (long long i = 0; i < nrows; i++)
            hoff[2 * rows + i] = hs[i];
        rc = cuda_code(cudaMemcpyAsync(src_off, hoff, 3 * rows * sizeof(long long),
                                       cudaMemcpyHostToDevice, s));
        if (!rc) {
            recat_rows<<<dim3(8, (unsigned)nrows), 256, 0, s>>>(rlen, rval, src_off, dst_off, seg,
                                                                (int)K, W, B, olen, oval);
            rc = cuda_code(cudaGetLastError());
        }
        if (!rc) // the next call's host writes wait for this copy's source to be read
            rc = cuda_code(cudaStreamSynchronize(s));
    }
    const long long nl = K * W * B;
    if (!rc && nl < NL)
        rc = cuda_code(cudaMemsetAsync(olen + nl, 0, (NL - nl) * sizeof(int64_t), s));
    if (!rc && total < NV)
        rc = cuda_code(cudaMemsetAsync(oval + total, 0, (NV - total) * sizeof(int64_t), s));
    if (!rc) { // host writes of the next call come after its first synchronisation
        hsizes[0] = nl;
        hsizes[1] = total;
        rc = cuda_code(
            cudaMemcpyAsync(osizes, hsizes, 2 * sizeof(int64_t), cudaMemcpyHostToDevice, s));
    }
    return rc;
}

// key_splits of one call (the same on every rank, from (seed, key)), by key % 4: PKB's pattern
// (weights 1 + d % 3: exactly PKB's 1 + d % 3 when F = 2W - 1, preset pkb), equal (F / W, the
// remainder last), skewed (weights up to e^4, ~30% zero: ranks that own no feature), hot (one
// rank owns KM = 2F / W features, the most any may, another none). None above KM.
static void make_key_splits(uint64_t seed, int key, int W, long long F, long long KM,
                            long long *ks) {
    const uint64_t base =
        pk_splitmix64(seed ^ pk_splitmix64(0x70736b00ULL + (uint64_t)(unsigned)key));
    const int mode = ((key % 4) + 4) % 4;
    double w[PK_MAX_RANKS];
    const int hot = (int)(pk_splitmix64(base + 1) % (uint64_t)W);
    // W = 1 (the single-GPU diagnostic): no other rank to leave empty.
    const int empty =
        W > 1 ? (hot + 1 + (int)(pk_splitmix64(base + 2) % (uint64_t)(W - 1))) % W : hot;
    for (int d = 0; d < W; d++) {
        if (mode == 0)
            w[d] = 1.0 + d % 3;
        else if (mode == 2)
            w[d] = pk_splitmix_unit(base + 100 + (uint64_t)d) < 0.3
                       ? 0.0
                       : exp(4.0 * pk_splitmix_unit(base + 200 + (uint64_t)d));
        else
            w[d] = 1.0;
    }
    if (mode == 2)
        w[(int)(pk_splitmix64(base + 3) % (uint64_t)W)] += 1.0; // some weight is > 0
    if (mode == 1) {
        for (int d = 0; d < W; d++)
            ks[d] = F / W;
        ks[W - 1] += F % W;
    } else if (mode == 3) {
        const long long to_hot = KM < F ? KM : F;
        w[hot] = 0.0;
        w[empty] = 0.0;
        double rest = 0;
        for (int d = 0; d < W; d++)
            rest += w[d];
        if (rest <= 0.0) // W = 2: the other rank takes what is left (none when KM >= F)
            w[empty] = 1.0;
        pk_splits_apportion(F - to_hot, w, W, ks);
        ks[hot] += to_hot;
    } else {
        pk_splits_apportion(F, w, W, ks);
    }
    for (int d = 0; d < W; d++) // above KM: the excess to ranks with room, in rank order
        for (int e = 0; e < W && ks[d] > KM; e++) {
            const long long mv = ks[d] - KM < KM - ks[e] ? ks[d] - KM : KM - ks[e];
            if (e != d && mv > 0) {
                ks[d] -= mv;
                ks[e] += mv;
            }
        }
}

struct KeySplits {
    long long ks[PK_MAX_RANKS];
};

__global__ void key_splits_kernel(KeySplits k, int W, int64_t *out) {
    if (threadIdx.x < W)
        out[threadIdx.x] = k.ks[threadIdx.x];
}

// lengths[g B + b] by key % 3: PKB's randint(5, 21); jagged (40% empty lists, the rest 1..L);
// skewed (a quarter of the features empty for the whole batch, the others L u^3: mostly short,
// a few long). Per rank, from (seed, key, rank, index).
__global__ void lengths_kernel(uint64_t base, int mode, long long F, long long B, long long L,
                               int64_t *lengths) {
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < F * B;
         i += (long long)gridDim.x * blockDim.x) {
        const uint64_t h = pk_splitmix64(base + (uint64_t)i);
        const double u = (double)(h >> 11) * (1.0 / 9007199254740992.0); // [0, 1)
        long long len;
        if (mode == 0)
            len = 5 + (long long)(h % 16);
        else if (mode == 1)
            len = u < 0.4 ? 0 : 1 + (long long)(h % (uint64_t)L);
        else
            len = pk_splitmix64(base ^ (0xfeedULL + (uint64_t)(i / B))) % 4 == 0
                      ? 0
                      : (long long)((double)L * u * u * u);
        lengths[i] = len < L ? len : L;
    }
}

static int generate(const pk_problem_call *call, uint64_t seed, int key) {
    const pk_ctx *ctx = call->ctx;
    const int W = ctx->world_size;
    const long long F = call->dims[0], B = call->dims[1], L = call->dims[2], KM = call->dims[3];
    KeySplits k = {};
    make_key_splits(seed, key, W, F, KM, k.ks);
    key_splits_kernel<<<1, 32, 0, ctx->stream>>>(k, W, static_cast<int64_t *>(call->args[2]));
    const uint64_t base = pk_splitmix64(
        seed ^ pk_splitmix64(0x706c6e00ULL ^ ((uint64_t)(unsigned)key << 8) ^ (uint64_t)ctx->rank));
    lengths_kernel<<<264, 256, 0, ctx->stream>>>(base, ((key % 3) + 3) % 3, F, B, L,
                                                 static_cast<int64_t *>(call->args[0]));
    return cuda_code(cudaGetLastError());
}

static int invoke(void *fn, const pk_problem_call *c) {
    if (!fn || c->n_args != 6 || c->n_dims < 6)
        return -1;
    return reinterpret_cast<entry_fn>(fn)(
        c->ctx, static_cast<const int64_t *>(c->args[0]), static_cast<const int64_t *>(c->args[1]),
        static_cast<const int64_t *>(c->args[2]), static_cast<int64_t *>(c->args[3]),
        static_cast<int64_t *>(c->args[4]), static_cast<int64_t *>(c->args[5]), (size_t)c->dims[0],
        (size_t)c->dims[1], (size_t)c->dims[2], (size_t)c->dims[4], (size_t)c->dims[5]);
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, invoke, generate, init, fini, NULL};
    return &module;
}
