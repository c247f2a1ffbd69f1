/* How a worker was started (Open MPI's mpirun, Slurm's srun, an MPICH-style PMI launcher, or
 * by hand) and what that means for it: its rank, its local rank among the workers of its
 * node, the GPUs it takes, and its share of the node's cores. */
#ifndef PK_LAUNCH_ENV_H
#define PK_LAUNCH_ENV_H

#include <stddef.h>

#include "pk_common.h"
#include "pk_gpu_topology.h"

typedef struct pk_launch_env {
    char kind[16];              /* "mpirun", "srun", "pmi" or "none" */
    int rank, size;             /* -1 when unknown */
    int local_rank, local_size; /* 0 and 1 when started alone */
    char cuda_visible[512];     /* CUDA_VISIBLE_DEVICES as the launcher set it; "" if unset */
} pk_launch_env;

/* Reads the launcher's variables from getenv_fn (getenv in production; tests pass a table). */
void pk_launch_env_read(pk_launch_env *e, const char *(*getenv_fn)(const char *name));

/* Removes the launcher's variables (OMPI_*, PMIX_*, PMI_*, SLURM_*, ...) from this process, so
 * the mpirun that the harness starts for a job's ranks does not think it runs inside the
 * worker's own MPI or Slurm job step. Call after pk_launch_env_read. */
void pk_launch_env_scrub(void);

/* Slurm's "2(x3),1" task counts: the tasks on node node_id, or -1. */
int pk_slurm_tasks_on_node(const char *tasks_per_node, int node_id);

/* The GPUs this worker takes, as NVML indices in out (n_out of them):
 *  - spec "none": no GPUs; a list "0,1,...": exactly those (each must exist);
 *  - spec NULL or "auto": the GPUs the launcher made visible (CUDA_VISIBLE_DEVICES, indices or
 *    GPU-UUIDs), else all of them split into local_size contiguous shares, this worker taking
 *    share local_rank (several workers on one node never share a GPU);
 * then, when those span several NVLink domains, only the largest domain (a job's GPUs must
 * share one); note says what was left out and why (empty when nothing was). */
int pk_launch_pick_gpus(const pk_gpu_topology *t, const char *spec, const pk_launch_env *e,
                        int *out, int *n_out, char *note, size_t note_cap, pk_error *err);

/* Compile workers when not given: the cores this process may use (its affinity mask), shared
 * with the other workers of the node when the launcher did not bind them, minus one for the
 * runs, at least 1. */
int pk_launch_default_compile_workers(const pk_launch_env *e);

#endif
