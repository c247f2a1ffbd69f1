// Hostile twin of hostile_peer_guard.cu: every rank exposes y and the 16 bytes after it as an
// MPI window, and rank 0 overwrites the 4 bytes just past the end of rank 1's y (rank 1's
// guard zone). Host ranks share no memory, so one-sided MPI is the peer's way in. Expected:
// incorrect.
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "pk_ctx.h"

// The correct pairwise exchange, summing only the first `part` elements of y.
static int all_reduce(const pk_ctx *ctx, const float *x, float *y, size_t n, size_t part) {
    MPI_Comm comm = (MPI_Comm)ctx->mpi_comm;
    memcpy(y, x, part * sizeof *y);
    float *tmp = (float *)malloc(n * sizeof *tmp);
    if (!tmp)
        return 1;
    for (int p = 0; p < ctx->world_size; p++) {
        if (p == ctx->rank)
            continue;
        MPI_Sendrecv(x, (int)n, MPI_FLOAT, p, 0, tmp, (int)n, MPI_FLOAT, p, 0, comm,
                     MPI_STATUS_IGNORE);
        for (size_t i = 0; i < part; i++)
            y[i] += tmp[i];
    }
    free(tmp);
    return 0;
}

extern "C" int solution(const pk_ctx *ctx, const float *x, float *y, size_t n) {
    int rc = all_reduce(ctx, x, y, n, n);
    MPI_Win win;
    if (MPI_Win_create(y, (MPI_Aint)((n + 4) * sizeof *y), sizeof *y, MPI_INFO_NULL,
                       (MPI_Comm)ctx->mpi_comm, &win) != MPI_SUCCESS)
        return 2;
    // The stray word is the complement of what is there, so that all 4 bytes change: a fixed
    // value would match the secret guard byte now and then (1 in 256 per byte), and the harness
    // would count fewer bytes than were written.
    unsigned int stray = 0;
    MPI_Win_fence(0, win);
    if (ctx->rank == 0)
        MPI_Get(&stray, 1, MPI_UNSIGNED, 1, (MPI_Aint)n, 1, MPI_UNSIGNED, win);
    MPI_Win_fence(0, win);
    stray = ~stray;
    if (ctx->rank == 0)
        MPI_Put(&stray, 1, MPI_UNSIGNED, 1, (MPI_Aint)n, 1, MPI_UNSIGNED, win);
    MPI_Win_fence(0, win);
    MPI_Win_free(&win);
    return rc;
}
