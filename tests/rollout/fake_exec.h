/* A test executor: GPUs as plain resources, no harness. It checks that no GPU ever holds
 * more jobs (warm or running) than max_per_gpu and records the order in which runs start. */
#ifndef FAKE_EXEC_H
#define FAKE_EXEC_H

#include <pthread.h>

#include "pk_sched_exec.h"

typedef struct fake_problem {
    int world_size;
    int needs_gpu;
    int run_us;
} fake_problem;

typedef struct fake_stats {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int gate_closed; /* compiles wait while set */
    int hold_closed; /* compiles of sources starting "hold" wait while set */
    int compiling_now, compiles, runs;
    int max_per_gpu;   /* jobs a GPU may hold at once (0: 1, exclusive) */
    int resident[64];  /* jobs holding each GPU: warm or running */
    int peak_resident; /* most jobs one GPU held at once */
    int double_booked; /* a GPU given to more jobs than max_per_gpu */
    int running_now, peak_running;
    double kernel_ms_per_run; /* reported as the run's check + timing (stats tests) */
    long mem_mb;              /* what device_mb reports for every job */
    int wrong_width;          /* a run given a GPU count other than its world size */
    uint64_t run_order[4096]; /* tickets in the order runs started */
    /* Event clock: when each ticket's compile ended and its run started (0: never). */
    int clock;
    int compile_done_at[4096];
    int run_started_at[4096];
    /* Pre-grants: warm(), and what became of each warm run. */
    int warms;
    int warmed[4096];         /* ticket was warmed */
    uint64_t warm_mask[4096]; /* the GPUs each ticket was warmed on */
    int warm_mismatch;        /* a warmed job ran on GPUs other than its warm ones */
    int warm_aborted;         /* a warmed job released without running (compile failed) */
    int warm_ran;             /* a warmed job ran */
    /* infra_error: a run on any of these GPU ids (bit id) fails "before the candidate". */
    uint64_t bad_gpus;
    int run_count[4096];        /* runs of each ticket */
    uint64_t run_mask[4096][2]; /* the GPUs of its first two runs */
} fake_stats;

void fake_exec_init(fake_stats *st, pk_sched_exec *exec);
void fake_exec_set_gate(fake_stats *st, int closed);
void fake_exec_set_hold(fake_stats *st, int closed);
void fake_completion_free(pk_completion *c);

#endif
