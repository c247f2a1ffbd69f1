/* The job-execution step of the scheduler, injectable so that the scheduling logic can be
 * tested with GPUs as plain resources and no real jobs. The real executor (harness_exec.c)
 * drives the harness's staged job API with the compile and baseline caches. */
#ifndef PK_SCHED_EXEC_H
#define PK_SCHED_EXEC_H

#include "pk_scheduler.h"

/* One job as an executor sees it. Compile runs on a CPU worker, run on a run worker that
 * holds the GPUs (or a host slot); release runs on the dispatcher thread. */
typedef struct pk_sched_task {
    uint64_t ticket;
    const pk_problem *problem;
    const char *source;
    pk_eval_opts opts; /* a copy; its strings live as long as the task */
    pk_eval_result *res;
    pk_error *err;
    void *state;              /* the executor's per-job state */
    int run_needed;           /* set by compile: 1 when the job goes on to a run */
    int compile_cache_hit;    /* set by compile: the object came from the compile cache */
    int compile_cache_miss;   /* set by compile: compiled afresh (and stored) */
    int baseline_cache_hit;   /* set by compile */
    int baseline_cache_stale; /* set by compile: an entry existed but is measured again */
    /* Pre-grant (warm) bookkeeping of the executor, under its own lock: */
    int compile_over; /* compile has returned: too late to warm */
    int warm_pending; /* warm came before compile had a job: start it once there is one */
    int n_warm_gpus;
    int warm_gpus[PK_SCHED_MAX_GPUS];
} pk_sched_task;

typedef struct pk_sched_exec {
    void *ctx;
    /* World size and whether GPUs are needed (a host problem takes one host slot). */
    int (*describe)(void *ctx, const pk_problem *p, int *world_size, int *needs_gpu, pk_error *err);
    /* Non-zero return: the harness itself failed (t->err says why). */
    int (*compile)(void *ctx, pk_sched_task *t);
    int (*run)(void *ctx, pk_sched_task *t, const int *gpus, int n_gpus);
    void (*release)(void *ctx, pk_sched_task *t);
    /* Optional (NULL: jobs are never pre-granted). Called on the dispatcher thread while t's
     * compile runs on a worker, with GPUs granted ahead of need: start the run on them so that
     * process, CUDA and NCCL start-up overlap the compile. The same GPUs then come to run (if
     * the compile succeeds); release must end a warm run that never ran. Non-zero: not warmed
     * (e.g. the compile is already over); the scheduler takes the GPUs back. */
    int (*warm)(void *ctx, pk_sched_task *t, const int *gpus, int n_gpus);
    /* Optional (NULL: 0): device memory one job of p at world_size needs on each of its GPUs,
     * MiB, for co-residency (pk_scheduler_opts.gpu_mem_mb). */
    long (*device_mb)(void *ctx, const pk_problem *p, int world_size);
    /* Frees a completion the scheduler could not deliver (pk_completion_free for real jobs). */
    void (*free_completion)(pk_completion *c);
    void (*destroy)(void *ctx);
} pk_sched_exec;

/* pk_scheduler_create with a given executor; the scheduler owns it (destroy on free). */
int pk_scheduler_create_with_exec(const pk_scheduler_opts *opts, const pk_sched_exec *exec,
                                  pk_scheduler **out, pk_error *err);

#endif
