/* Internal to pk-runner: the process that runs all ranks of one job inside the sandbox. */
#ifndef PK_RUNNER_H
#define PK_RUNNER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pk_harness.h"
#include "pk_problem_module.h"
#include "pk_problem_spec.h"

#ifdef __cplusplus
extern "C" {
#endif

#define RN_MAX_TIMED_ITERS 1024

/* Options the harness passes on the command line. */
typedef struct rn_opts {
    const char *problem_dir, *suite, *name, *module, *candidate, *out, *progress_dir, *launcher;
    uint64_t seed;
    int trials, world, skip_timing, reference_as_candidate;
    int skip_reference_timing; /* the harness has a cached baseline */
    /* Warm mode: after device, communicator and arena setup, wait for progress_dir/go (then
     * load the candidate and run) or progress_dir/abort (then exit without a result). */
    int wait_go;
} rn_opts;

/* Communication between the ranks of the harness itself (never the candidate's channel). */
typedef struct rn_group {
    int rank, world;
    int (*barrier)(struct rn_group *g);
    /* Every rank contributes `bytes` from mine; all receives world * bytes, rank-ordered. */
    int (*allgather)(struct rn_group *g, const void *mine, void *all, size_t bytes);
    void *impl;
} rn_group;

int rn_group_mpi_init(rn_group *g, int *argc, char ***argv);
void *rn_group_mpi_comm(rn_group *g); /* MPI_COMM_WORLD, as pk_ctx.mpi_comm */
void rn_group_mpi_finalize(rn_group *g);
/* Forks one child per rank: returns 0 in each child (g->rank set), 1 in the parent, which
 * only supervises (children[i] = pid of rank i), -1 on failure. */
int rn_group_fork_init(rn_group *g, int world, pid_t *children);
int rn_group_broadcast(rn_group *g, void *buf, size_t bytes, int root);

typedef struct rn_compare {
    double max_abs, max_rel;
    long long bad_index; /* first failing element, -1 if none */
    double expected, got;
} rn_compare;

/* Memory, generation, comparison and timing on one rank: host loops or CUDA. */
typedef struct rn_backend {
    int gpu;
    char name[64]; /* GPU name, or "host" */
    char error[256];
    void *(*alloc_private)(struct rn_backend *b, size_t bytes); /* outside the arena */
    /* Like alloc_private, for reference outputs (collective on GPUs when registered). */
    void *(*alloc_reference)(struct rn_backend *b, size_t bytes);
    void (*free_private)(struct rn_backend *b, void *p);
    int (*generate)(struct rn_backend *b, void *p, pk_dtype t, size_t count, uint64_t key);
    int (*poison)(struct rn_backend *b, void *p, pk_dtype t, size_t count);
    int (*copy)(struct rn_backend *b, void *dst, const void *src, size_t bytes);
    int (*equal)(struct rn_backend *b, const void *x, const void *y, size_t bytes, int *eq);
    int (*compare)(struct rn_backend *b, const void *got, const void *want, pk_dtype t,
                   size_t count, double atol, double rtol, rn_compare *out);
    int (*sync)(struct rn_backend *b); /* waits for all work of this rank; reports errors */
    /* Waits for ctx->stream only (NULL: sync), so unjoined side streams stay unfinished. */
    int (*sync_stream)(struct rn_backend *b, pk_ctx *ctx);
    /* Runs fn(arg, i) for i in [0, iters) timing each call; writes per-call microseconds and
     * the host wall time of the whole loop (ending with a full device sync). */
    int (*time_calls)(struct rn_backend *b, int (*fn)(void *arg, int i), void *arg, int iters,
                      double *us, double *host_total_us);
    int (*setup_arena)(struct rn_backend *b, pk_ctx *ctx, size_t bytes);
    void (*fini)(struct rn_backend *b, pk_ctx *ctx);
    size_t l2_bytes;
    void *impl;
} rn_backend;

/* Init fills ctx (rank, device, stream, communicator) and b->l2_bytes; setup_arena then
 * allocates the symmetric arena of `bytes` and fills ctx's arena fields. */
int rn_backend_host_init(rn_backend *b, pk_ctx *ctx);
int rn_backend_gpu_init(rn_backend *b, pk_ctx *ctx, rn_group *g);

/* Counter-based generator: the value of element i of the stream `key`. */
uint64_t rn_mix(uint64_t x);
uint64_t rn_stream_key(uint64_t seed, int trial, int rank, int arg);

/* Progress markers: what each rank is doing, read by the harness after a timeout. */
void rn_progress(const char *dir, int rank, const char *state, int trial);
/* Warm mode: waits until dir/go (returns 1) or dir/abort (returns 0) exists. Unbounded here:
 * the harness's sandbox wall limit bounds the wait. */
int rn_wait_go(const char *dir);
/* On SIGSEGV/SIGBUS/SIGFPE/SIGILL/SIGABRT: writes rank<r>.crash ("rank signal"), re-raises. */
void rn_crash_markers_install(const char *dir, int rank);

/* Everything rank 0 reports, serialized to msgpack by rn_report_write. */
typedef struct rn_report {
    int ok;
    char error[512];
    int error_rank;
    char gpu_name[64];
    char launcher[16];
    double setup_ms, check_ms, timing_ms;
    double init_ms, arena_ms; /* slowest rank */
    int aborted;              /* warm mode: the harness said abort; nothing else is valid */
    int n_trials;
    pk_trial_verdict trials[PK_EVAL_MAX_TRIALS];
    int timed;
    pk_timing candidate, reference;
    int unsynchronized;
    char unsync_detail[256];
} rn_report;

int rn_report_write(const char *path, const rn_report *r);

/* The rank's whole job: load, set up, trials, timing. Returns the process exit code. */
int rn_rank_main(const rn_opts *o, rn_group *g);

void rn_timing_stats(const double *us, int n, pk_timing *out);

#ifdef __cplusplus
}
#endif
#endif
