/* Internal: the run watcher. Jobs share GPUs, and a run that holds its GPU locks (timing
 * exclusive, trials shared: problems/runner/rn_gpu_lock.h) holds up every other job on those
 * GPUs. The watcher polls the runner's lock marker and bounds each lock-holding phase by a
 * budget derived from the problem (docs/problems.md, "Sharing GPUs"), well below the run
 * limit; time spent waiting for other jobs' locks does not count against the run limit (up to
 * one more run limit). It only ever moves the sandbox's deadline (pk_sandbox_opts.deadline_ms).
 *
 * The marker (problems/runner/rn_gpu_lock.h) carries the runner's own clock: when the state
 * began, the longest shared hold, the total wait so far and the runner's estimate of its
 * timing phase, so phases shorter than a poll are measured too. It is in the job's work dir,
 * which the candidate can write: a forged marker can shorten its own run, or lengthen it by at
 * most one run limit and so hold its GPUs for at most a run limit (the sandbox's wall limit
 * is fixed); it never changes another job's verdict. */
#ifndef PK_JOB_WATCH_H
#define PK_JOB_WATCH_H

#include <pthread.h>

#include "pk_problem_spec.h"

/* Floors of the phase budgets, and the cap of the lock-wait credit, in run limits. */
#define PK_PHASE_FLOOR_MS 10000 /* ... or a quarter of the run limit, whichever is smaller */
#define PK_PHASE_SHARED_FACTOR 4
#define PK_PHASE_EXCLUSIVE_FACTOR 3
/* Timing with the runner's own estimate (the marker's expect_ms, from the pace of its trials):
 * FACTOR x the estimate plus SLACK, never below FLOOR. A hung timing phase holds every GPU of
 * the job alone, so this bound is what the jobs beside it wait at most. */
#define PK_EXPECT_FACTOR 3
#define PK_EXPECT_SLACK_MS 1000
#define PK_EXPECT_FLOOR_MS 2000
#define PK_WATCH_TICK_MS 20

enum pk_lock_state {
    PK_LOCK_STATE_NONE = 0,
    PK_LOCK_STATE_WAIT_SHARED,
    PK_LOCK_STATE_SHARED,
    PK_LOCK_STATE_WAIT_EXCLUSIVE,
    PK_LOCK_STATE_EXCLUSIVE,
    PK_LOCK_STATE_SETUP, /* shared for the set-up: no phase budget, not a trial's length */
};

enum pk_watch_bound {
    PK_BOUND_NONE = 0,
    PK_BOUND_RUN,       /* the run limit (plus the lock-wait credit) */
    PK_BOUND_SHARED,    /* a shared phase's budget */
    PK_BOUND_EXCLUSIVE, /* the exclusive (timing) phase's budget */
    PK_BOUND_ABORT,     /* a warm run being aborted */
};

/* One reading of the marker. full: it had the times (else only seq and state). */
typedef struct pk_lock_marker {
    unsigned seq;
    int state; /* enum pk_lock_state */
    double since_ms, longest_shared_ms, waited_ms;
    double expect_ms; /* the runner's estimate of its exclusive hold; 0: none */
    int full;
} pk_lock_marker;

/* What the watcher has seen of one run; pure, driven by observations and a clock. */
typedef struct pk_phase_track {
    int run_limit_ms;
    double warmup_ms;    /* the problem's, per side */
    int exclusive_calls; /* timed + warm-up chunk + verification calls, both sides */
    unsigned seq;        /* last marker sequence number seen */
    int state;           /* enum pk_lock_state */
    double phase_start;  /* when the current state was first seen */
    double last_tick;    /* the previous observation */
    double longest_shared_ms;
    double expect_ms;     /* the latest marker's estimate of the exclusive hold (0: none) */
    double waited_ms;     /* in wait-* states, up to now */
    double waited_before; /* observed waits of earlier states (markers without times) */
} pk_phase_track;

void pk_phase_track_init(pk_phase_track *t, const pk_problem *p, int run_limit_ms);
/* "<seq> <state> [<since_ms> <longest_shared_ms> <waited_ms> [<expect_ms>]]\n"; -1 when not a
 * marker. */
int pk_lock_marker_parse(const char *text, pk_lock_marker *m);
void pk_phase_track_observe(pk_phase_track *t, const pk_lock_marker *m, double now);
/* Budget of a shared or exclusive phase (ms), given what was seen so far. */
int pk_phase_budget_ms(const pk_phase_track *t, int exclusive);
/* The deadline to enforce (pk_now_ms clock; 0: none) and which bound sets it. base_start > 0:
 * the run limit counts from there. */
double pk_phase_track_deadline(const pk_phase_track *t, double base_start, int *bound);

/* The watcher of one run: a thread polling `marker` every PK_WATCH_TICK_MS while the run
 * takes locks; otherwise only the base deadline is kept. */
typedef struct pk_run_watch {
    pthread_mutex_t mu;
    pthread_t thread;
    int started, stop, locked;
    double *deadline; /* the sandbox's (pk_deadline_store) */
    double base_start, abort_at;
    char marker[700];
    pk_phase_track track;
    int bound;     /* of the deadline stored last */
    double stored; /* that deadline */
    int budget_ms; /* of the phase bound, when bound is a phase */
} pk_run_watch;

/* deadline: where the sandbox reads its deadline. locked: the run takes GPU locks. */
int pk_run_watch_start(pk_run_watch *w, const pk_problem *p, int run_limit_ms, const char *job_dir,
                       int locked, double *deadline);
void pk_run_watch_set_base(pk_run_watch *w, double base_start);
void pk_run_watch_abort(pk_run_watch *w, double at);
void pk_run_watch_stop(pk_run_watch *w);
/* After a timeout at time `now`: the bound that ended the run, its budget (phases) and the
 * lock-wait credit granted. */
int pk_run_watch_fired(pk_run_watch *w, double now, int *budget_ms, double *waited_ms);
/* The runner's latest estimate of its exclusive (timing) hold, ms; 0 when it gave none. */
double pk_run_watch_expect_ms(pk_run_watch *w);

#endif
