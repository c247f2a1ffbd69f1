// Hostile twin of hostile_raw_syscall.cu: a raw `syscall` instruction in host code.
// Expected: rejected (raw_syscall).
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

static long raw_getpid(void) {
    long ret;
    __asm__ volatile("syscall" : "=a"(ret) : "a"(39L) : "rcx", "r11", "memory");
    return ret;
}

extern "C" int solution(const pk_ctx *ctx, const float *x, float *y, size_t n) {
    if (raw_getpid() <= 0)
        return 5;
    return all_reduce(ctx, x, y, n, n);
}
