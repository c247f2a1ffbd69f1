/* Private to the worker: what it learned about itself at start (worker_setup.c) and its
 * sessions with the broker (worker_loop.c). */
#ifndef PK_WORKER_INTERNAL_H
#define PK_WORKER_INTERNAL_H

#include <jansson.h>

#include "pk_gpu_topology.h"
#include "pk_host_info.h"
#include "pk_launch_env.h"
#include "pk_problem_version.h"
#include "pk_scheduler.h"
#include "pk_worker.h"

typedef struct pk_worker_ctx {
    pk_worker_opts o;
    char name[160];
    char *data_dir;
    pk_problem_set *problems;
    char (*versions)[PK_PROBLEM_VERSION_LEN + 1]; /* per problem, in set order */
    int *module_ok;                               /* per problem */
    pk_launch_env launch;
    pk_gpu_topology topo; /* the GPUs this worker took */
    int gpus[PK_SCHED_MAX_GPUS];
    int n_gpus;
    char gpu_note[512];
    pk_host_info host;
    int compile_workers, host_slots, max_jobs, max_world;
    json_t *info; /* the announcement */
} pk_worker_ctx;

/* Everything but sockets and the scheduler. */
int pk_worker_ctx_init(pk_worker_ctx *w, const pk_worker_opts *o, pk_error *err);
void pk_worker_ctx_free(pk_worker_ctx *w);
/* The problem and its index, or NULL. */
const pk_problem *pk_worker_find_problem(const pk_worker_ctx *w, const char *id, size_t *index);

#endif
