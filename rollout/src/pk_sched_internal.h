/* Shared state of the scheduler's threads: the public API (scheduler.c), the dispatcher
 * thread (dispatcher.c) and the worker threads (worker.c). */
#ifndef PK_SCHED_INTERNAL_H
#define PK_SCHED_INTERNAL_H

#include <pthread.h>

#include "pk_gpu_slots.h"
#include "pk_sched_exec.h"
#include "pk_sched_msg.h"

enum pk_worker_kind { PK_WORKER_COMPILE, PK_WORKER_RUN };

typedef struct pk_sched_job {
    pk_sched_task task;
    pk_completion *completion; /* task.res and task.err point into it */
    char *source;
    char *work_root;
    char *launcher;
    int world_size;
    int needs_gpu;
    long mem_mb; /* on each of its GPUs */
    int n_slots; /* slots held while running */
    int slots[PK_SCHED_MAX_GPUS];
    double t_submit_ms;
    int pregranted;            /* holds its GPUs (slots) since before its compile ended */
    int warm_tried;            /* considered for a pre-grant once: never again */
    int infra_tries;           /* runs again after an infra_error (at most 1) */
    char infra_first[320];     /* the first infra_error's reason and GPUs */
    struct pk_sched_job *next; /* compile queue or ready list link */
} pk_sched_job;

typedef struct pk_sched_worker {
    struct pk_scheduler *s;
    int index;
    int kind;
    int busy;
    int dead;          /* its thread could not open its socket; guarded by the mutex */
    pk_sched_job *job; /* the job it works on, when busy */
    pthread_t thread;
    int started;
} pk_sched_worker;

struct pk_scheduler {
    pk_scheduler_opts opts; /* done_endpoint and cache_dir copied below */
    char *done_endpoint;
    char *cache_dir;
    pk_sched_exec exec;
    void *zctx;
    char submit_ep[64];
    char work_ep[64];

    pthread_mutex_t mu; /* guards everything below it and the submit socket */
    void *submit_push;
    int accepting;
    int in_flight;
    uint64_t next_ticket;
    pk_scheduler_stats stats;

    /* Dispatcher thread only. */
    pthread_t dispatcher;
    int dispatcher_started;
    void *submit_pull;
    void *work_router;
    void *done_push;
    pk_sched_job *compile_head, *compile_tail;
    pk_sched_job *ready_head, *ready_tail; /* pre-granted and compiled: run next */
    pk_gpu_slots gpu_slots;
    pk_gpu_slots host_slots;
    /* Held time per GPU (under mu): since when each GPU holds a job, 0 when it holds none. */
    double held_since[PK_SCHED_MAX_GPUS];
    /* infra_errors in a row per GPU slot (dispatcher only); at gpu_infra_limit it leaves. */
    int infra_streak[PK_SCHED_MAX_GPUS];
    pk_sched_worker *workers;
    int n_workers;
    int n_compile_workers;
    int stopping;            /* pk_scheduler_shutdown was called: no new submits */
    double stop_deadline_ms; /* the end of its grace */
    int grace_over;          /* past it: waiting work was cancelled, nothing new starts */

    double t_start_ms;
};

void pk_sched_job_free(pk_sched_job *j); /* the record only; its completion is sent on */
void *pk_sched_dispatcher_main(void *arg);
void *pk_sched_worker_main(void *arg);

#endif
