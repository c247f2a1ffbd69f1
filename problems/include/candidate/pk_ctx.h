/* pk_ctx.h: the only harness header a candidate may include.
 *
 * Every rank of a job runs the candidate's entry point with the same pk_ctx layout.
 * Device problems: one rank per GPU, an initialized NCCL communicator, and a
 * symmetric arena (ncclMemAlloc, registered as one NCCL window, with an ncclDevComm)
 * that holds every argument buffer and a scratch buffer at the same offset on every
 * rank, so a peer's buffer is reachable by NVLink load/store through pk_peer().
 * Host problems (suite `selftest`): no CUDA, the ranks talk through MPI (mpi_comm).
 *
 * NCCL's device API (nccl_device.h, with <cuda/atomic> and the rest of libcu++ behind it) is
 * opt-in per problem: the harness compiles with -DPK_DEVICE_API=1 only for problems whose
 * meta.json says "device_api": true. Without it this header declares no ncclDevComm, dev_comm is
 * opaque bytes, and the runner creates no device communicator (the bytes stay zero). Parsing
 * the device API costs the compiler more than a second, so problems that offer only the host
 * API (and cuBLAS) leave it out.
 */
#ifndef PK_CTX_H
#define PK_CTX_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <nccl.h>
#if defined(__cplusplus) && defined(PK_DEVICE_API)
#include <nccl_device.h>
#endif

#define PK_CTX_ABI_VERSION 1
#define PK_MAX_RANKS 8

typedef struct pk_ctx {
    int abi_version; /* PK_CTX_ABI_VERSION */
    int rank;
    int world_size;
    int device;          /* CUDA device of this rank (already current); -1 on host problems */
    cudaStream_t stream; /* do all GPU work on this stream: the harness times it */
    ncclComm_t comm;     /* initialized over all ranks; NULL on host problems */

    /* Symmetric arena: same size and layout on every rank. */
    void *sym_base;                /* this rank's arena */
    size_t sym_size;               /* bytes */
    void *peer_base[PK_MAX_RANKS]; /* every rank's arena as mapped here; peer_base[rank] == sym_base
                                    */
    ncclWindow_t window;           /* the arena's NCCL window (offsets are from sym_base) */
    void *scratch; /* candidate scratch inside the arena, same offset on all ranks */
    size_t scratch_size;
    int lsa_barrier_count; /* LSA barriers reserved in dev_comm (use one per CTA) */
    /* Device communicator for NCCL's device API (LSA), on problems with "device_api": true.
     * C, and C++ without PK_DEVICE_API, see the same 512 aligned bytes, so the layout (and
     * mpi_comm's offset) is identical either way. */
#if defined(__cplusplus) && defined(PK_DEVICE_API)
    union alignas(16) {
        ncclDevComm dev_comm;
        unsigned char dev_comm_opaque[512];
    };
#elif defined(__cplusplus)
    alignas(16) unsigned char dev_comm_opaque[512];
#else
    _Alignas(16) unsigned char dev_comm_opaque[512];
#endif

    void *mpi_comm; /* host problems: an MPI_Comm over all ranks; NULL on device problems */
} pk_ctx;

#if defined(__cplusplus) && defined(PK_DEVICE_API)
static_assert(sizeof(ncclDevComm) <= 512, "pk_ctx reserves 512 bytes for ncclDevComm");
#endif

/* Address of `local` (a pointer into this rank's arena) as seen in `peer`'s arena. */
static inline void *pk_peer(const pk_ctx *ctx, const void *local, int peer) {
    return (char *)ctx->peer_base[peer] + ((const char *)local - (const char *)ctx->sym_base);
}

/* Byte offset of `local` inside the arena, for ncclGetLsaPointer(ctx->window, offset, peer). */
static inline size_t pk_sym_offset(const pk_ctx *ctx, const void *local) {
    return (size_t)((const char *)local - (const char *)ctx->sym_base);
}

#endif
