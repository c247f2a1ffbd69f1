// pkb/37_ulysses_gather_heads_scatter_seq (ParallelKernelBench problem 37): DeepSpeed-Ulysses'
// switch back from a head split to a sequence split after attention. Rank r holds x
// (B, seq, H, D), all seq positions of its H heads (a capacity of B T H D elements, of which
// the first B seq H D are the tensor). PKB pads the sequence with zeros to a multiple of W
// (Tw = ceil(seq / W) positions per rank) and rank r needs positions [r Tw, (r+1) Tw) of every
// rank's heads, heads concatenated in rank order:
//   y[b, s, q*H + h, d] = x_q[b, r*Tw + s, h, d] if r*Tw + s < seq, else 0
//   y: (B, Tw, W H, D)
// Only y's first B Tw W H D elements are output (check() below).
#include "pk_ulysses.cuh"

typedef int (*entry_fn)(const pk_ctx *, const __nv_bfloat16 *, __nv_bfloat16 *, size_t, size_t,
                        size_t, size_t, size_t);

#define THREADS PK_ULY_THREADS

static PkUlyWork g_work; // send and receive chunks, (W, B Tw H D) each

// _pad_tensor + tensor_split(dim=seq)[q].contiguous() for every remote q: send (W, B, Tw, H D),
// zeros where the padded sequence has no position.
__global__ void __launch_bounds__(THREADS)
    pack_seq(const uint4 *x, uint4 *send, int rank, int world, size_t B, size_t seq, size_t tw,
             size_t row_vecs) {
    const size_t per = B * tw * row_vecs, n = per * (size_t)world,
                 stride = (size_t)gridDim.x * THREADS;
    for (size_t o = (size_t)blockIdx.x * THREADS + threadIdx.x; o < n; o += stride) {
        const size_t q = o / per, e = o % per, v = e % row_vecs, s = (e / row_vecs) % tw,
                     b = e / row_vecs / tw, pos = q * tw + s;
        if ((int)q != rank)
            send[o] = pos < seq ? x[(b * seq + pos) * row_vecs + v] : make_uint4(0, 0, 0, 0);
    }
}

// torch.cat(received, dim=heads): y (B, Tw, W H, D), our own chunk straight from x.
__global__ void __launch_bounds__(THREADS)
    unpack_heads(const uint4 *x, const uint4 *recv, uint4 *y, int rank, int world, size_t B,
                 size_t seq, size_t tw, size_t row_vecs) {
    const size_t per = B * tw * row_vecs, n = per * (size_t)world,
                 stride = (size_t)gridDim.x * THREADS;
    for (size_t o = (size_t)blockIdx.x * THREADS + threadIdx.x; o < n; o += stride) {
        const size_t v = o % row_vecs, q = (o / row_vecs) % (size_t)world,
                     bs = o / row_vecs / (size_t)world, pos = rank * tw + bs % tw;
        if ((int)q != rank)
            y[o] = recv[q * per + bs * row_vecs + v];
        else
            y[o] = pos < seq ? x[((bs / tw) * seq + pos) * row_vecs + v] : make_uint4(0, 0, 0, 0);
    }
}

// Baseline, PKB's steps: the zero padding and the W - 1 remote sequence chunks made contiguous
// (one pack kernel), host-driven NCCL send/recv of them (dist.all_to_all, one group) into a work
// buffer, then torch.cat(dim=2) as one kernel that reads our own chunk straight from x (PKB's
// own chunk goes through NCCL's local copy; skipping it only helps the baseline).
static int reference(const pk_problem_call *call) {
    const pk_ctx *ctx = call->ctx;
    const int world = ctx->world_size, rank = ctx->rank;
    const size_t B = (size_t)call->dims[0], T = (size_t)call->dims[1], H = (size_t)call->dims[2],
                 D = (size_t)call->dims[3], seq = (size_t)call->params[0], W = (size_t)world;
    if (seq > T || T % W != 0 || D % 8 != 0)
        return 3001;
    const size_t tw = (seq + W - 1) / W, chunk = B * tw * H * D; // elements per rank
    // Sized for the largest sequence, so the collective registration happens once.
    int rc = pk_uly_work_reserve(ctx, &g_work, 2 * B * T * H * D * sizeof(__nv_bfloat16));
    if (rc)
        return rc;
    const uint4 *x = static_cast<const uint4 *>(call->args[0]);
    __nv_bfloat16 *send = static_cast<__nv_bfloat16 *>(g_work.ptr), *recv = send + W * chunk;
    pack_seq<<<4 * 132, THREADS, 0, ctx->stream>>>(x, reinterpret_cast<uint4 *>(send), rank, world,
                                                   B, seq, tw, H * D / 8);
    rc = pk_uly_cuda(cudaGetLastError());
    if (!rc)
        rc = pk_uly_exchange(ctx, send, recv, chunk);
    if (rc)
        return rc;
    unpack_heads<<<4 * 132, THREADS, 0, ctx->stream>>>(x, reinterpret_cast<const uint4 *>(recv),
                                                       static_cast<uint4 *>(call->args[1]), rank,
                                                       world, B, seq, tw, H * D / 8);
    return pk_uly_cuda(cudaGetLastError());
}

// dims: B, T, H, D; params: seq.
static int check(const pk_problem_call *want, const pk_problem_call *got, int arg,
                 pk_check_report *out) {
    const size_t W = (size_t)want->ctx->world_size, seq = (size_t)want->params[0];
    if (arg != 1 || want->params[0] < 0)
        return -1;
    const size_t tw = (seq + W - 1) / W;
    return pk_uly_check_prefix(
        want, got, arg,
        (size_t)want->dims[0] * tw * W * (size_t)want->dims[2] * (size_t)want->dims[3], out);
}

static int init(const pk_ctx *ctx) {
    (void)ctx;
    return pk_uly_check_init();
}

static void fini(const pk_ctx *ctx) {
    pk_uly_work_free(ctx, &g_work);
    pk_uly_check_fini();
}

static int invoke(void *fn, const pk_problem_call *c) {
    if (!fn || c->n_args != 2 || c->n_dims < 4 || c->n_params < 1 || c->params[0] < 0)
        return -1;
    return reinterpret_cast<entry_fn>(fn)(
        c->ctx, static_cast<const __nv_bfloat16 *>(c->args[0]),
        static_cast<__nv_bfloat16 *>(c->args[1]), (size_t)c->dims[0], (size_t)c->dims[1],
        (size_t)c->dims[2], (size_t)c->dims[3], (size_t)c->params[0]);
}

extern "C" const pk_problem_module *pk_problem_module_v1(void) {
    static const pk_problem_module module = {
        PK_PROBLEM_ABI_VERSION, reference, invoke, NULL, init, fini, check};
    return &module;
}
