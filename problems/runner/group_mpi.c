/* Harness-side rank group over MPI (launcher "mpi"). */
#include "pk_runner.h"

#include <mpi.h>

static int mpi_barrier(rn_group *g) {
    (void)g;
    return MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS ? 0 : -1;
}

static int mpi_allgather(rn_group *g, const void *mine, void *all, size_t bytes) {
    (void)g;
    return MPI_Allgather(mine, (int)bytes, MPI_BYTE, all, (int)bytes, MPI_BYTE, MPI_COMM_WORLD) ==
                   MPI_SUCCESS
               ? 0
               : -1;
}

int rn_group_mpi_init(rn_group *g, int *argc, char ***argv) {
    if (MPI_Init(argc, argv) != MPI_SUCCESS)
        return -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &g->rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g->world);
    g->barrier = mpi_barrier;
    g->allgather = mpi_allgather;
    g->impl = NULL;
    return 0;
}

void *rn_group_mpi_comm(rn_group *g) {
    (void)g;
    return (void *)MPI_COMM_WORLD;
}

void rn_group_mpi_finalize(rn_group *g) {
    (void)g;
    MPI_Finalize();
}
