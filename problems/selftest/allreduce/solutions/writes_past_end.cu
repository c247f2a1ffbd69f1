// Hostile twin of hostile_write_past_end.cu: also writes y[n]. Expected: incorrect.
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
    // The complement of the 4 guard bytes there, so that all 4 change: a fixed value would
    // match the secret guard bytes now and then (1 in 256 per byte), and the harness would
    // name a later first byte than the one written.
    unsigned char *stray = (unsigned char *)(y + n);
    for (int i = 0; i < 4; i++)
        stray[i] = (unsigned char)~stray[i];
    return rc;
}
