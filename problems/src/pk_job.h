/* Internal: the state of one evaluation job, shared by the stage implementations. */
#ifndef PK_JOB_H
#define PK_JOB_H

#include "pk_harness_internal.h"

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
    char compile_key[65];
    int failed;   /* a stage produced the final verdict */
    int compiled; /* an object passed the symbol checks */
};

void pk_job_compile_flags(const pk_job *job, char *out, size_t cap);
int pk_job_check_symbols(pk_job *job, pk_eval_result *res, pk_error *err);
/* Turns the run stage's outcome (sandbox verdict, result file, markers) into res. */
int pk_job_classify_run(pk_job *job, const pk_sandbox_result *sr, pk_eval_result *res,
                        pk_error *err);

#endif
