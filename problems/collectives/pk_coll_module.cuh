/* pk_coll_module.cuh: what the eight collective problem modules share.
 *
 * Every collective has the same entry point, solution(ctx, x, y, n), so the call that
 * casts the candidate's symbol lives here once. Each problem.cu adds its reference.
 */
#ifndef PK_COLL_MODULE_CUH
#define PK_COLL_MODULE_CUH

#include "pk_problem_module.h"

typedef int (*pk_coll_entry)(const pk_ctx *ctx, const __nv_bfloat16 *x, __nv_bfloat16 *y, size_t n);

/* Argument order is meta.json's: x, then y; dims[0] is n. */
static inline int pk_coll_invoke(void *fn, const pk_problem_call *call) {
    if (fn == NULL || call->n_args != 2 || call->n_dims < 1 || call->dims[0] <= 0)
        return -1;
    pk_coll_entry entry = reinterpret_cast<pk_coll_entry>(fn);
    return entry(call->ctx, static_cast<const __nv_bfloat16 *>(call->args[0]),
                 static_cast<__nv_bfloat16 *>(call->args[1]), (size_t)call->dims[0]);
}

/* The module returns int codes: 0 on success, the NCCL or CUDA error otherwise. */
static inline int pk_coll_nccl_code(ncclResult_t r) {
    return r == ncclSuccess ? 0 : 1000 + (int)r;
}

static inline int pk_coll_cuda_code(cudaError_t e) {
    return e == cudaSuccess ? 0 : 2000 + (int)e;
}

/* Sends block `count` elements from each rank to one rank (gather) or from one rank to each
 * (scatter) with host-driven point-to-point NCCL, the baseline for collectives NCCL 2.28.3
 * (on the GPU machines) lacks. The root's own block is a local copy. */
static inline int pk_coll_rooted_p2p(const pk_ctx *ctx, int root, const __nv_bfloat16 *src,
                                     __nv_bfloat16 *dst, size_t count, int gather) {
    const size_t bytes = count * sizeof(__nv_bfloat16);
    int rc = 0;
    if (ctx->rank == root) {
        const __nv_bfloat16 *from = gather ? src : src + (size_t)root * count;
        __nv_bfloat16 *to = gather ? dst + (size_t)root * count : dst;
        rc = pk_coll_cuda_code(
            cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, ctx->stream));
    }
    if (rc != 0)
        return rc;
    rc = pk_coll_nccl_code(ncclGroupStart());
    if (rc != 0)
        return rc;
    if (ctx->rank == root) {
        for (int p = 0; p < ctx->world_size && rc == 0; p++) {
            if (p == root)
                continue;
            if (gather)
                rc = pk_coll_nccl_code(ncclRecv(dst + (size_t)p * count, count, ncclBfloat16, p,
                                                ctx->comm, ctx->stream));
            else
                rc = pk_coll_nccl_code(ncclSend(src + (size_t)p * count, count, ncclBfloat16, p,
                                                ctx->comm, ctx->stream));
        }
    } else if (gather) {
        rc = pk_coll_nccl_code(ncclSend(src, count, ncclBfloat16, root, ctx->comm, ctx->stream));
    } else {
        rc = pk_coll_nccl_code(ncclRecv(dst, count, ncclBfloat16, root, ctx->comm, ctx->stream));
    }
    int end = pk_coll_nccl_code(ncclGroupEnd());
    return rc != 0 ? rc : end;
}

#endif
