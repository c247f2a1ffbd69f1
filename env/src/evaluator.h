/* Where the server's evaluations run: the local scheduler on this host's GPUs, or, with
 * `--worker-bind`, the broker, which hands jobs to remote workers and to an in-process worker
 * on this host's GPUs (none with `--gpus none`: a pure broker). Both deliver pk_completion
 * pointers on the same done endpoint, so the server's completion path is one. */
#ifndef PK_ENV_EVALUATOR_H
#define PK_ENV_EVALUATOR_H

#include <pthread.h>
#include <signal.h>

#include <jansson.h>

#include "pk_broker.h"
#include "pk_scheduler.h"
#include "pk_worker.h"

typedef struct pk_evaluator_opts {
    void *zmq_ctx;
    const char *done_endpoint;
    const char *cache_dir;
    int compile_workers, queue_limit;
    int n_gpus; /* -1: all (NVML); 0: none */
    const int *gpus;
    int n_nvml_gpus; /* GPUs NVML lists (used when n_gpus is -1) */
    int jobs_per_gpu;
    int rank_visibility; /* pk_scheduler_opts.rank_visibility */
    long gpu_mem_mb;
    /* Broker mode when n_worker_binds > 0. */
    const char *const *worker_binds;
    int n_worker_binds;
    int heartbeat_ms, liveness;
    double worker_wait_s;
    /* The tcp:// worker endpoints' security (pk_broker_opts); the in-process worker's inproc
     * endpoint needs none. */
    const pk_curve_server *worker_curve;
    int insecure;
    const char *problems_dir, *modules_dir, *data_dir;
    int grace_ms;
    /* The local scheduler's baseline cache (pk_scheduler_opts). */
    int remeasure_baseline;
    double baseline_max_cv, baseline_max_age_s;
} pk_evaluator_opts;

typedef struct pk_evaluator {
    pk_scheduler *sched;
    pk_broker *broker;
    int local_gpus; /* GPU slots of the local scheduler; -1 in broker mode */
    /* The in-process worker (broker mode without --gpus none). */
    pthread_t local_thread;
    int local_started;
    volatile sig_atomic_t local_stop;
    pk_worker_opts local_opts;
    char local_ep[96], local_gpu_list[256];
    pk_error local_err;
} pk_evaluator;

int pk_evaluator_start(pk_evaluator *ev, const pk_evaluator_opts *o, pk_error *err);
/* gpu_model: the GPU model of the episode's earlier turns ("" for none; broker mode only). */
int pk_evaluator_submit(pk_evaluator *ev, const pk_problem *p, const char *source,
                        const pk_eval_opts *opts, const char *gpu_model, void *user,
                        uint64_t *ticket, pk_error *err);
/* The scheduler's figures; in broker mode summed over the connected workers' heartbeats. */
void pk_evaluator_stats(pk_evaluator *ev, pk_scheduler_stats *out);
/* Broker mode: {broker: {...}, workers: [...]} to add to `stats`; NULL in local mode. */
json_t *pk_evaluator_stats_json(pk_evaluator *ev);
void pk_evaluator_shutdown(pk_evaluator *ev, int grace_ms);
void pk_evaluator_free(pk_evaluator *ev);

#endif
