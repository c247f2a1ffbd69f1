/* pk_scheduler: runs evaluation jobs (compile on a CPU worker pool, run on GPU slots) and
 * delivers each result to the server's event loop over a ZeroMQ inproc socket, so that
 * evaluation never blocks the server's socket. */
#ifndef PK_SCHEDULER_H
#define PK_SCHEDULER_H

#include <stdint.h>

#include "pk_common.h"
#include "pk_harness.h"
#include "pk_problems.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PK_SCHED_MAX_GPUS 16

typedef struct pk_scheduler pk_scheduler;

typedef struct pk_scheduler_opts {
    void *zmq_ctx; /* the server's ZeroMQ context (inproc needs the same one) */
    const char
        *done_endpoint;  /* the scheduler connects a PUSH socket here; the server binds PULL */
    int compile_workers; /* 0: number of cores minus one (at least 1) */
    int n_gpus;          /* GPU slots; 0: host problems only */
    int gpus[PK_SCHED_MAX_GPUS];
    int queue_limit;        /* jobs accepted but not finished; beyond it submit says overloaded */
    const char *cache_dir;  /* compile and baseline caches; NULL: no caching */
    int remeasure_baseline; /* time the reference on every step instead of caching it */
    double baseline_max_cv; /* a cached baseline with a higher CV is measured again; 0: 0.1 */
    double baseline_max_age_s; /* ... and one older than this; 0: 86400 */
    int run_host_slots;        /* concurrent runs of host problems; 0: compile_workers */
    int max_bypass; /* later GPU jobs that may go ahead of a waiting one; 0: 4, -1: none */
    /* Sharing GPUs (rollout/README.md): jobs resident on one GPU at once (setup and trials
     * overlap; timing holds the GPU alone through the per-GPU timing locks). 0: 8; 1: a job
     * has its GPUs to itself. */
    int jobs_per_gpu;
    /* Device memory the jobs on one GPU may use, MiB (each job's is estimated from its
     * problem's sizes: pk_job_device_mb). 0: 90% of the smallest free memory NVML reports
     * when the scheduler starts (memory not counted when NVML is missing); -1: not counted. */
    long gpu_mem_mb;
    const char *lock_dir; /* the timing locks; NULL: pk_gpu_lock_dir_default */
    /* infra_errors in a row (runs that failed before candidate code was loaded, with no run
     * on that GPU succeeding in between) after which a GPU leaves the pool; 0: 3. */
    int gpu_infra_limit;
    /* Which GPUs each rank process of a GPU job sees (pk_eval_opts.rank_visibility), for jobs
     * that do not say; 0: $PKGYM_RANK_VISIBILITY, else all. */
    int rank_visibility;
} pk_scheduler_opts;

/* One finished job, sent over done_endpoint as a single frame holding the pointer
 * (sizeof(pk_completion *) bytes). The receiver owns it and frees it with pk_completion_free. */
typedef struct pk_completion {
    uint64_t ticket;
    void *user;
    int harness_rc; /* non-zero: the harness itself failed (error holds why) */
    pk_error error;
    pk_eval_result result; /* owned */
} pk_completion;

typedef struct pk_scheduler_stats {
    int queued_compile;
    int queued_run;
    int compiling;
    int running;
    int gpus_total;
    int gpus_busy; /* GPUs holding at least one job (warm or running) */
    uint64_t done;
    uint64_t compile_cache_hits;
    uint64_t compile_cache_misses;
    uint64_t baseline_cache_hits;
    uint64_t baseline_cache_stale; /* cached baselines measured again (CV or age over the limit) */
    /* Summed over GPUs since start: time a GPU held at least one job (its process start-up,
     * waits and exit included). What the GPUs did meanwhile is gpu_kernel_ms. */
    double gpu_busy_ms;
    int compile_workers;
    double compile_busy_ms; /* summed over compile workers since start */
    double host_busy_ms;    /* runs of host problems, summed over host slots */
    double uptime_ms;       /* since create */
    uint64_t overloaded;    /* submits refused with PK_ERR_OVERLOADED */
    uint64_t backfilled;    /* GPU grants that went ahead of an older waiting job */
    uint64_t harness_failures;
    uint64_t pregranted; /* GPU grants made while the job still compiled (warm runs) */
    /* Sharing GPUs: */
    int jobs_per_gpu;
    long gpu_mem_mb;         /* per GPU; 0: memory not counted */
    int resident_jobs;       /* GPU jobs holding GPUs now (warm or running) */
    int peak_resident;       /* most jobs one GPU held at once */
    double gpu_kernel_ms;    /* GPU-ms in trials and timing (their lock waits excluded) x GPUs */
    double gpu_timing_ms;    /* ... of which timing, which holds its GPUs alone */
    double gpu_lock_wait_ms; /* GPU-ms jobs waited for other jobs' timing locks */
    /* Failures of ours (status infra_error: before candidate code was loaded): */
    uint64_t infra_errors;  /* runs that ended so */
    uint64_t infra_retries; /* of which were run again (once, on other GPUs where there are) */
    uint64_t infra_failed;  /* jobs that failed so twice: answered with an error, never scored */
    int n_gpus_removed;     /* GPUs taken out of the pool (gpu_infra_limit in a row) */
    int gpus_removed[PK_SCHED_MAX_GPUS];
} pk_scheduler_stats;

int pk_scheduler_create(const pk_scheduler_opts *opts, pk_scheduler **out, pk_error *err);
/* Queues one evaluation (source is copied). PK_ERR_OVERLOADED when the queue is full. */
int pk_scheduler_submit(pk_scheduler *s, const pk_problem *p, const char *source,
                        const pk_eval_opts *opts, void *user, uint64_t *ticket, pk_error *err);
void pk_scheduler_get_stats(pk_scheduler *s, pk_scheduler_stats *out);
/* Stops accepting. Until grace_ms have passed, queued and compiled jobs go on (compiles start,
 * compiled jobs run); then every job that has not started its next stage is cancelled (its
 * completion carries harness_rc PK_ERR_BUSY and a reason). A stage running at the deadline is
 * not interrupted (the harness's compile and run timeouts bound it): a run delivers its
 * verdict, a compile is cancelled when it ends. Returns once the workers are joined. */
void pk_scheduler_shutdown(pk_scheduler *s, int grace_ms);
void pk_scheduler_free(pk_scheduler *s);
void pk_completion_free(pk_completion *c);

#ifdef __cplusplus
}
#endif
#endif
