/* Internal: the state of one evaluation job, shared by the stage implementations. */
#ifndef PK_JOB_H
#define PK_JOB_H

#include <pthread.h>

#include "pk_harness_internal.h"
#include "pk_job_watch.h"

/* Everything one run of pk-runner needs, kept in the job so that a warm run's background
 * thread can use it. */
typedef struct pk_job_launch {
    char world[8], trials[8], seed_path[660], module_arg[600], nccl_debug[64];
    char nccl_subsys[96];
    char *argv[64];
    const char *env_add[12];
    int gpus[PK_MAX_RANKS];
    pk_sandbox_opts so;
    /* GPU locks (gpu_locks.c): the directory, the ids, each file bound read-write. */
    int locked;
    char lock_dir[512], lock_ids[64];
    char lock_files[2 * PK_MAX_RANKS][600];
    const char *rw[1 + 2 * PK_MAX_RANKS];
} pk_job_launch;

/* A run started ahead of its compile (pk_job_warm). */
typedef struct pk_job_warm_state {
    pthread_t thread;
    pk_job_launch launch;
    double deadline;      /* > 0: the run's wall limit counted from go; pk_deadline_load/store */
    pk_run_watch watch;   /* the only writer of deadline once started */
    double t_start, t_go; /* pk_now_ms() */
    int spawn_rc;
    pk_error spawn_err;
    pk_sandbox_result sr;
} pk_job_warm_state;

struct pk_job {
    const pk_problem *p;
    pk_eval_opts opts;
    pk_harness_paths paths;
    int world;
    uint64_t seed;
    int trials;
    char dir[600], src_path[640], so_path[640], result_path[640];
    char flags[1024];
    char runner_dir[512];
    const char *ro[8]; /* read-only binds every sandbox of this job gets */
    int n_ro;
    char solutions_dir[640]; /* the problem's solutions/: no sandbox of the job shows it */
    const char *hide[1];
    char compile_key[65];
    int failed;              /* a stage produced the final verdict */
    int compiled;            /* an object passed the symbol checks */
    pk_job_warm_state *warm; /* non-NULL between pk_job_warm and the run or abort */
    /* What ended a run that timed out (enum pk_watch_bound), for its reason. */
    int timeout_bound, timeout_budget_ms;
    double timeout_expect_ms; /* the runner's timing estimate when the run was stopped; 0 none */
    double lock_credit_ms;    /* run limit extended by waits for other jobs' GPU locks */
};

void pk_job_compile_flags(const pk_job *job, char *out, size_t cap);
int pk_job_check_symbols(pk_job *job, pk_eval_result *res, pk_error *err);
/* Turns the run stage's outcome (sandbox verdict, result file, markers) into res. */
int pk_job_classify_run(pk_job *job, const pk_sandbox_result *sr, pk_eval_result *res,
                        pk_error *err);

/* Fills l for one run of pk-runner (the run stage's, or the profile stage's). */
int pk_job_build_launch(pk_job *job, const char *launcher, const int *gpus, int n_gpus, int warm,
                        pk_job_launch *l, pk_error *err);
/* The profile stage (job_profile.c): after a run judged correct, when job->opts.profile asks.
 * Never fails the step: whatever happens goes to res->profile. */
void pk_job_profile(pk_job *job, const int *gpus, int n_gpus, pk_eval_result *res);

/* Warm run: writes the abort marker, ends the sandbox and joins. No-op when not warm. */
void pk_job_warm_abort(pk_job *job);

#endif
