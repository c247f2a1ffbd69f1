/* Internal to pk-runner: the process that runs all ranks of one job inside the sandbox. */
#ifndef PK_RUNNER_H
#define PK_RUNNER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "pk_harness.h"
#include "pk_problem_module.h"
#include "pk_problem_spec.h"
#include "pk_runner_exit.h"
#include "rn_gpu_lock.h"
#include "rn_values.h"

#ifdef __cplusplus
extern "C" {
#endif

/* pk_harness.h stays free of CUDA headers, so it cannot use pk_ctx.h's PK_MAX_RANKS: the
 * result's per-rank arrays have their own constant, which must stay equal. */
#ifdef __cplusplus
static_assert(PK_EVAL_MAX_RANKS == PK_MAX_RANKS, "PK_EVAL_MAX_RANKS must equal PK_MAX_RANKS");
#else
_Static_assert(PK_EVAL_MAX_RANKS == PK_MAX_RANKS, "PK_EVAL_MAX_RANKS must equal PK_MAX_RANKS");
#endif

#define RN_MAX_TIMED_ITERS 1024 /* timed calls per side (candidate or reference) */
#define RN_MAX_RUN_CALLS (RN_MAX_TIMED_ITERS + 1) /* a timed block and its lead-in */
#define RN_MAX_WARM_ITERS 4096                    /* warm-up calls per side */
#define RN_MIN_COPIES 4 /* rotation slots: secret visiting order needs a few */
#define RN_MAX_COPIES 64
#define RN_GUARD_BYTES 65536 /* guard zone before and after every argument */
#define RN_SAMPLES 16384     /* elements sampled per argument of a verified timed call */
#define RN_MAX_VERIFIED 96   /* verified calls per timed block */
#define RN_MAX_ZONES (RN_MAX_COPIES * PK_MAX_ARGS * 2 + 2)
/* Call keys: trials count from 0; then the call checked after timing; then timing's calls. */
#define RN_KEY_POST_TIMING (1 << 20)
#define RN_KEY_TIMED_BASE (1 << 21)

/* Options the harness passes on the command line. */
typedef struct rn_opts {
    const char *problem_dir, *suite, *name, *module, *candidate, *out, *progress_dir, *launcher;
    const char *seed_file; /* holds the secret seed; read and removed before any candidate code */
    const char *dump_dir;  /* each trial's inputs and reference outputs go here (cross-checks) */
    const char *dims;      /* dims override: "NAME=VALUE,..." or a preset name */
    uint64_t seed;
    int trials, world, skip_timing, reference_as_candidate;
    int skip_reference_timing; /* the harness has a cached baseline */
    /* Warm mode: after device, communicator and arena setup, wait for progress_dir/go (then
     * load the candidate and run) or progress_dir/abort (then exit without a result). */
    int wait_go;
    /* Per-GPU timing locks (rn_gpu_lock.h): the directory and the job's GPUs; none when NULL. */
    const char *lock_dir;
    int lock_ids[RN_LOCK_MAX], n_lock_ids;
    int teardown; /* free CUDA/NCCL resources before exit (default: exit right after the result) */
    int lock_setup; /* set-up (context, communicator, arena) holds the GPU locks shared */
    int lock_exit;  /* fork launcher: the ranks exit while the supervisor holds them shared */
    /* Tests of the infra_error path: set-up fails on every rank, as a device would. Only the
     * harness passes it, from the operator's environment (PKGYM_FAKE_SETUP_FAILURE*). */
    int fake_setup_failure;
    int regime; /* --regime: every input draws this regime where allowed; -1: secret */
    /* The profile stage's runs (docs/feedback.md, "Profiles"): after the trials, one warm-up
     * call and one call bracketed by profile_range, under the GPU locks held exclusively.
     * The harness passes --skip-timing with it: nothing of such a run is timed. */
    int profile_call;
    /* --rank-visibility own: each rank's CUDA_VISIBLE_DEVICES is its own GPU (device 0 then);
     * all (default): every rank sees all the job's GPUs and uses device `rank`. */
    int rank_visibility_own;
} rn_opts;

/* The CUDA_VISIBLE_DEVICES of rank `rank` under --rank-visibility own: the rank-th entry of the
 * job's list (`list`, comma-separated, as the sandbox set it), or the rank's index when the list
 * is unset or empty. Returns 0, or -1 when the list has no such entry or out is too small. */
int rn_visible_own(const char *list, int rank, char *out, size_t cap);
/* Applies rn_visible_own to this process's environment; before anything initializes CUDA. */
int rn_visible_apply(int rank);

/* Communication between the ranks of the harness itself (never the candidate's channel). */
typedef struct rn_group {
    int rank, world;
    int (*barrier)(struct rn_group *g);
    /* Every rank contributes `bytes` from mine; all receives world * bytes, rank-ordered. */
    int (*allgather)(struct rn_group *g, const void *mine, void *all, size_t bytes);
    void *impl; /* the launcher's state (fork: the shared region) */
} rn_group;

int rn_group_mpi_init(rn_group *g, int *argc, char ***argv);
void *rn_group_mpi_comm(rn_group *g); /* MPI_COMM_WORLD, as pk_ctx.mpi_comm */
void rn_group_mpi_finalize(rn_group *g);
/* Forks one child per rank: returns 0 in each child (g->rank set), 1 in the parent, which
 * only supervises (children[i] = pid of rank i), -1 on failure. */
int rn_group_fork_init(rn_group *g, int world, pid_t *children);
/* --lock-exit: the supervisor starts a thread that takes the GPU locks shared once rank 0 is
 * done with them (rn_group_fork_hold_exit, before waiting for the ranks), and every rank
 * passes the gate before it exits (rn_group_fork_exit_gate); both or neither. */
int rn_group_fork_hold_exit(rn_group *g, const rn_opts *o);
void rn_group_fork_exit_gate(rn_group *g);
int rn_group_broadcast(rn_group *g, void *buf, size_t bytes, int root);

typedef struct rn_compare {
    double max_abs, max_rel;
    long long bad_index; /* first failing element, -1 if none */
    double expected, got;
    long long n_bad;            /* elements outside the tolerance */
    unsigned long long max_ulp; /* the largest ulp distance among them (~0: a NaN) */
    /* Sums of (got - want)^2 and want^2 over the elements where the relative tolerance is the
     * larger part (rtol |want| >= atol, or every element when rtol is 0): the norm-wise check,
     * which leaves elements near zero to the element-wise one. */
    double err_sq, want_sq;
} rn_compare;

/* One guard zone: arena bytes [lo, hi) that nobody may write. */
typedef struct rn_zone {
    uint64_t lo, hi;
    int arg;   /* argument index, or -1 for the scratch buffer */
    int after; /* 1: after the argument's end; 0: before its start */
} rn_zone;

/* The first violated zone (by zone order) after a check; zone < 0 if none. */
typedef struct rn_guard_hit {
    int zone;
    uint64_t bytes;       /* changed bytes in that zone */
    uint64_t first, last; /* offsets of the first and last changed byte, from zone lo */
} rn_guard_hit;

/* Memory, generation, comparison and timing on one rank: host loops or CUDA. Operations
 * run on the harness's own stream and wait for it, unless use_timed_stream(b, 1) routed them
 * onto ctx->stream (the timed epilogue), where they are only enqueued. */
typedef struct rn_backend {
    int gpu;
    char name[64]; /* GPU name, or "host" */
    char error[256];
    void *(*alloc_private)(struct rn_backend *b, size_t bytes); /* outside the arena */
    /* Like alloc_private, for reference outputs (collective on GPUs when registered). */
    void *(*alloc_reference)(struct rn_backend *b, size_t bytes);
    void (*free_private)(struct rn_backend *b, void *p);
    int (*generate)(struct rn_backend *b, void *p, pk_dtype t, size_t count, uint64_t key,
                    const rn_gen *gen);
    int (*poison)(struct rn_backend *b, void *p, pk_dtype t, size_t count);
    int (*copy)(struct rn_backend *b, void *dst, const void *src, size_t bytes);
    int (*equal)(struct rn_backend *b, const void *x, const void *y, size_t bytes, int *eq);
    int (*compare)(struct rn_backend *b, const void *got, const void *want, pk_dtype t,
                   size_t count, double atol, double rtol, rn_compare *out);
    /* pos[k] = rn_sample_pos(key, count, n, k) for k < n (pos: private memory). */
    int (*sample_positions)(struct rn_backend *b, uint64_t *pos, uint64_t key, size_t count,
                            size_t n);
    /* dst[k] = src[pos[k]] for k < n, elements of esize bytes. */
    int (*gather)(struct rn_backend *b, void *dst, const void *src, size_t esize,
                  const uint64_t *pos, size_t n);
    int (*fill_guards)(struct rn_backend *b, void *base, const rn_zone *z, int n, uint64_t seed);
    int (*check_guards)(struct rn_backend *b, const void *base, const rn_zone *z, int n,
                        uint64_t seed, rn_guard_hit *hit);
    int (*flush_l2)(struct rn_backend *b); /* evicts the L2 (GPU; no-op on the host) */
    void (*use_timed_stream)(struct rn_backend *b, int on);
    /* The stream the operations above go to now (NULL: no streams, the host backend). */
    void *(*current_stream)(struct rn_backend *b);
    int (*sync)(struct rn_backend *b); /* waits for all work of this rank; reports errors */
    /* Waits for ctx->stream only (NULL: sync), so unjoined side streams stay unfinished. */
    int (*sync_stream)(struct rn_backend *b, pk_ctx *ctx);
    /* For i in [0, iters): times call(arg, i) alone, then runs epilogue(arg, i) untimed. Writes
     * per-call microseconds, the host wall time of the whole loop (ending with a full device
     * sync) and the time the timed stream took for the loop, epilogues included. */
    int (*time_calls)(struct rn_backend *b, int (*call)(void *arg, int i),
                      int (*epilogue)(void *arg, int i), void *arg, int iters, double *us,
                      double *host_total_us, double *stream_total_us);
    int (*to_host)(struct rn_backend *b, void *host, const void *src, size_t bytes);
    int (*rms)(struct rn_backend *b, const void *p, pk_dtype t, size_t count, double *out);
    int (*setup_arena)(struct rn_backend *b, pk_ctx *ctx, size_t bytes);
    void (*fini)(struct rn_backend *b, pk_ctx *ctx);
    /* --profile-call: brackets the profiled call for the profilers (cudaProfilerStart/Stop);
     * NULL on the host backend. */
    int (*profile_range)(struct rn_backend *b, int on);
    size_t l2_bytes;
    /* Set before setup_arena: the problem offers NCCL's device API ("device_api": true), so
     * the GPU backend creates ctx->dev_comm; otherwise it creates none (the bytes stay zero). */
    int device_api;
    /* Set before setup_arena: the most calls one time_calls will run (the GPU backend creates
     * that many event pairs then, not RN_MAX_RUN_CALLS of them). */
    int max_timed_calls;
} rn_backend;

/* Init fills ctx (rank, device, stream, communicator) and b->l2_bytes; setup_arena then
 * allocates the symmetric arena of `bytes` and fills ctx's arena fields. */
int rn_backend_host_init(rn_backend *b, pk_ctx *ctx);
/* device: the CUDA device of this rank (its rank, or 0 when it sees only its own GPU). */
int rn_backend_gpu_init(rn_backend *b, pk_ctx *ctx, rn_group *g, int device);

/* Key of the input stream of (trial or call key, rank, argument). */
uint64_t rn_stream_key(uint64_t seed, int trial, int rank, int arg);
/* A secret derived from the seed for one purpose (guard pattern, sample positions, plan). */
uint64_t rn_secret(uint64_t seed, uint64_t purpose);

/* Arena layout: `copies` rotation slots of every argument, each argument between two guard
 * zones, then the scratch buffer between two more. Same on every rank. */
typedef struct rn_layout {
    int copies;
    size_t set_bytes; /* one slot */
    size_t arg_off[PK_MAX_ARGS], arg_bytes[PK_MAX_ARGS];
    size_t scratch_off, scratch_bytes, arena_bytes;
    int n_zones;
    rn_zone zones[RN_MAX_ZONES];
} rn_layout;

/* copies: enough slots to exceed l2_multiple x L2, at least RN_MIN_COPIES. */
int rn_layout_make(const pk_problem *p, const pk_problem_sizes *sz, size_t l2_bytes,
                   rn_layout *out);
/* One line naming the violated zone: the argument, the side and the offsets. */
void rn_guard_describe(const pk_problem *p, const rn_layout *lay, const rn_guard_hit *hit, int rank,
                       char *out, size_t cap);

/* The secret plan of one step, the same on every rank: how many trials, warm-up and timed
 * calls, which slot each call uses and which timed calls are verified. */
typedef struct rn_block_plan {
    int n;
    unsigned char slot[RN_MAX_TIMED_ITERS];
    short verify[RN_MAX_TIMED_ITERS]; /* -1, or the call's snapshot index */
    int n_verified;
} rn_block_plan;

typedef struct rn_plan {
    int trials;
    unsigned char trial_slot[PK_EVAL_MAX_TRIALS + 1]; /* the last: the post-timing check */
    int warmup_iters;
    unsigned char warm_slot[RN_MAX_WARM_ITERS];
    int blocks;                                   /* timed blocks per side */
    rn_block_plan block[2][PK_MAX_TIMING_BLOCKS]; /* [candidate, reference][block] */
    uint64_t guard_seed, sample_key;
} rn_plan;

/* Jitter: trials base..base+2, warm-up and timed calls x [0.875, 1.125], split into `blocks`
 * blocks per side (fewer when there are fewer calls) of secretly jittered sizes; each timed
 * call verified with probability 1/4, plus the last call on every slot of every candidate
 * block. */
void rn_plan_make(uint64_t seed, int base_trials, int warmup_iters, int iters, int blocks,
                  int copies, rn_plan *out);

/* What the trials showed of one call's cost (rank 0's wall clock, ms): a slot's fill (fresh
 * inputs, poisoned outputs), the candidate plus the reference on it, and one rank barrier
 * (with ranks oversubscribed on few cores, a barrier can cost more than a call). The first
 * trial pays for lazy loading and connection set-up; the pace is the slowest of the later
 * trials, part by part, or the first when it is the only one. */
typedef struct rn_pace {
    double first_fill_ms, first_calls_ms, first_sync_ms;
    double fill_ms, calls_ms, sync_ms; /* max over the trials after the first */
    int later;                         /* trials after the first seen */
} rn_pace;
void rn_pace_add(rn_pace *p, int first, double fill_ms, double calls_ms, double sync_ms);
void rn_pace_max(rn_pace *into, const rn_pace *other); /* part by part: the slowest rank's */
/* How long the timing phase of `plan` should take at that pace (ms): every warm-up, lead-in,
 * timed and verified call at the cost of a fill plus both calls (an epilogue regenerates a slot),
 * every slot refilled before each warm-up and block, a warm-up bounded by its calls and by
 * warmup_ms plus one chunk begun before that cap, a rank barrier (or broadcast) per warm-up chunk
 * and per block, and one per side to gather the times. 0 when the pace is unknown. n_sides: 2, or
 * 1 when the reference is not timed. */
double rn_timing_expect_ms(const rn_plan *plan, const rn_pace *pace, int n_sides, int copies,
                           double warmup_ms);

/* Progress markers: what each rank is doing, read by the harness after a timeout. */
void rn_progress(const char *dir, int rank, const char *state, int trial);
/* Warm mode: waits until dir/go (returns 1) or dir/abort (returns 0) exists. Unbounded here:
 * the harness's sandbox wall limit bounds the wait. */
int rn_wait_go(const char *dir);
/* PK_RUNNER_SETUP_DONE on stderr, in one write (pk_runner_exit.h). */
void rn_setup_done_marker(void);
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
    int infra;                /* failed before the candidate was loaded (ours) */
    int n_trials;
    int trials_planned; /* the plan's (jittered) number of trials */
    pk_trial_verdict trials[PK_EVAL_MAX_TRIALS];
    int timed;
    pk_timing candidate, reference;
    int unsynchronized;
    char unsync_detail[256];
    int guard_violation; /* a write outside an argument */
    char guard_detail[256];
    int timed_wrong;           /* a verified timed call (or the post-timing call) was wrong */
    int timed_inputs_modified; /* a verified timed call changed its inputs */
    int verified_calls;        /* timed calls verified, for the record (not for feedback) */
    double verify_ms;          /* slowest rank: epilogues, block checks, post-timing call, guards */
    double teardown_ms;        /* rank 0: freeing buffers, window, communicators */
    double lock_wait_ms;       /* rank 0: waiting for other jobs' GPU locks */
    double timing_expect_ms;   /* the expected timing phase (the slowest rank's pace) */
    double timing_hold_ms;     /* rank 0: timing's exclusive hold of the GPU locks */
} rn_report;

int rn_report_write(const char *path, const rn_report *r);

/* The state of one rank's job, shared by the trial and timing code. */
typedef struct rank_state {
    const rn_opts *o;
    rn_group *g;
    rn_backend b;
    pk_ctx ctx;
    pk_problem *p;
    pk_problem_sizes sz;
    rn_gen gen[PK_MAX_ARGS];
    void *mod_handle, *cand_handle;
    const pk_problem_module *mod;
    void *cand_fn;
    int (*init_fn)(const pk_ctx *);
    int (*fini_fn)(const pk_ctx *);
    int module_ready; /* the module's init() ran: its fini() runs at teardown */
    rn_layout lay;
    rn_plan plan;
    rn_zone *zones_dev; /* the zone table where check_guards reads it (device on GPUs) */
    void *ref_out[PK_MAX_ARGS], *pristine[PK_MAX_ARGS], *snap[PK_MAX_ARGS];
    /* Timed-call verification: sample positions per argument, and per call the samples of
     * every argument (verified calls into snaps, the others into discard). */
    uint64_t *pos[PK_MAX_ARGS];
    size_t n_samples[PK_MAX_ARGS], sample_off[PK_MAX_ARGS], sample_bytes;
    void *snaps, *discard, *check_buf;
    int next_key;                                     /* call key of the next regeneration */
    int slot_key[RN_MAX_COPIES];                      /* key of the inputs each slot holds */
    double slot_params[RN_MAX_COPIES][PK_MAX_PARAMS]; /* the params of that key */
    int verified_key[RN_MAX_VERIFIED];
    unsigned char verified_slot[RN_MAX_VERIFIED];
    rn_pace pace; /* of the trials, for the timing phase's expected length */
} rank_state;

/* What each rank tells the others after a step. */
typedef struct rank_step {
    int failed; /* runtime failure on this rank */
    char msg[400];
    int inputs_modified;
    double max_abs, max_rel;
    int mismatch;
    char arg[32];
    long long index;
    double expected, got;
    int unsynchronized;
    int guard_bad;
    char guard_detail[256];
    int timed_wrong, timed_inputs_modified;
    double init_ms, arena_ms;
    double verify_ms; /* wall of the verification's own work on this rank */
} rank_step;

/* One output's verdict (checker.c). */
typedef struct rn_verdict {
    int bad;
    long long index; /* first failing element; -1 if none, or when only the norm-wise check
                        failed: then expected is its bound and got the error, relative to the
                        reference output's norm */
    double expected, got, max_abs, max_rel;
} rn_verdict;
/* Judges output i: `got` against `want` (n elements each; samples or whole), by the argument's
 * checker. want_call and got_call are the calls whose outputs these are (for check()). */
int rn_check_output(rank_state *rs, int i, const void *got, const void *want, size_t n,
                    const pk_problem_call *want_call, const pk_problem_call *got_call,
                    rn_verdict *v);
/* Sets the call key a slot's inputs were drawn with, and the params its calls see. */
int rn_set_slot_key(rank_state *rs, int slot, int key);

/* regime.c: the input regime (pk_regime) argument `arg` draws for call key `key`, and its
 * generator for that call with the regime's parameters. */
int rn_regime_of(const rank_state *rs, int key, int arg);
void rn_gen_for_call(const rank_state *rs, int key, int arg, rn_gen *g);

/* rank.c pieces the timing code uses. */
uint64_t rn_arg_key(const rank_state *rs, int key, int arg); /* the stream of one argument */
void *rn_arg_ptr(rank_state *rs, int slot, int i);
void rn_make_call(rank_state *rs, int slot, int ref_outputs, pk_problem_call *c);
int rn_call_candidate(rank_state *rs, const pk_problem_call *c);
int rn_fail(rank_step *st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Fresh inputs of call key `key` in `slot` (harness stream, waits). */
int rn_fill_slot(rank_state *rs, int slot, int key, rank_step *st);
/* Enqueues fresh inputs of call key `key` into `slot` on the backend's current stream: the
 * generators, then the module's generate(). Outputs are left as they are. */
int rn_generate_inputs(rank_state *rs, int slot, int key);
/* Checks every guard zone; a violation goes into st. */
int rn_check_guards(rank_state *rs, rank_step *st);
/* One full correctness trial on fresh inputs of `key` in `slot`. */
int rn_check_trial(rank_state *rs, int key, int slot, rank_step *st);

/* The rank's whole job: load, set up, trials, timing. Returns the process exit code. */
int rn_rank_main(rn_opts *o, rn_group *g);
/* Reads the secret seed from o->seed_file (if set) into o->seed. */
int rn_read_seed(rn_opts *o);

/* --dump: one trial's inputs and reference outputs on this rank; rank 0 also writes the
 * manifest. */
int rn_dump_trial(rank_state *rs, int trial, int slot, rank_step *st);

/* gpu_phase.c: rank 0 takes the job's GPU locks in mode (RN_LOCK_SHARED, _EXCLUSIVE, _SETUP),
 * every rank waits for it; 0: the phase may run, else st says why not. Without a lock dir, or
 * with RN_LOCK_NONE, both return at once. End: a rank barrier, then rank 0 lets the locks go. */
int rn_gpu_phase_begin(rank_state *rs, int mode, rank_step *st);
void rn_gpu_phase_end(rank_state *rs);
double rn_gpu_lock_wait_ms(void); /* rank 0: time spent waiting for the locks */
/* Rank 0: the expected length of the next exclusive hold (ms, 0: none), written into the lock
 * marker so that the harness can bound a hung timing phase by it (problems/src/job_watch.c). */
void rn_gpu_phase_expect(double ms);

/* Warm-up and the timed blocks of both sides, with the timed calls' verification. */
int rn_time_both(rank_state *rs, rn_report *rep, rank_step *st);

void rn_timing_stats(const double *us, int n, pk_timing *out);

#ifdef __cplusplus
}
#endif
#endif
