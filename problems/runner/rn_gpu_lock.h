/* Per-GPU timing locks, shared by every job (and every sandbox) on the machine.
 *
 * GPU N has two files in the lock directory: gpuN.turnstile and gpuN.lock (flock(2) locks,
 * released by the kernel when the process dies). Timing takes gpuN.lock EXCLUSIVE; every other
 * phase that runs GPU work (a correctness trial, the post-timing check) takes it SHARED, and
 * so does the set-up (CUDA context, NCCL communicator, arena; RN_LOCK_SETUP), which disturbs
 * the timing of a job beside it; with --lock-exit, the ranks' exit too (held by the fork
 * launcher's supervisor). Writer preference: a writer takes the turnstile, then the lock, then
 * lets the turnstile go; a reader passes through the turnstile (takes it and lets it go) before
 * taking the lock shared. While a writer waits for the lock it holds the turnstile, so no new
 * reader gets in: timing is never starved by a stream of trials.
 *
 * Deadlock freedom: the locks of a job's GPUs are taken in ascending GPU order, turnstile
 * before lock (order T0 < L0 < T1 < L1 ...), by one process per job (rank 0); nobody waits
 * for a lower-ordered file while holding a higher one, so no cycle of waits can form.
 *
 * The holder writes a marker, `<seq> <state> <since_ms> <longest_shared_ms> <waited_ms>
 * <expect_ms>` (state one of none, wait-shared, shared, wait-exclusive, exclusive, setup;
 * since_ms on the CLOCK_MONOTONIC clock, which the sandbox shares with the harness; the longest
 * shared hold and the total wait so far; how long the runner expects its exclusive hold to
 * last, 0 when it has no estimate), that the harness polls to bound how long a phase may hold
 * the locks and to not count lock waits against the run limit (problems/src/job_watch.c). */
#ifndef RN_GPU_LOCK_H
#define RN_GPU_LOCK_H

#ifdef __cplusplus
extern "C" {
#endif

#define RN_LOCK_MAX 16

/* RN_LOCK_SETUP is shared, for the runner's set-up (CUDA context, communicator, arena): the
 * marker says "setup", which has no phase budget (the run limit bounds it), and its length is
 * not a trial's, so it does not scale the budgets of later phases. */
enum rn_lock_mode {
    RN_LOCK_NONE = 0,
    RN_LOCK_SHARED = 1,
    RN_LOCK_EXCLUSIVE = 2,
    RN_LOCK_SETUP = 3,
};

typedef struct rn_gpu_locks {
    int n;
    int ids[RN_LOCK_MAX]; /* ascending, distinct */
    int turn_fd[RN_LOCK_MAX], lock_fd[RN_LOCK_MAX];
    int held;         /* enum rn_lock_mode */
    char marker[512]; /* "" : no marker */
    unsigned seq;
    double wait_ms;           /* total time spent waiting for the locks */
    double held_since;        /* when the current hold began (pk_now_ms, CLOCK_MONOTONIC) */
    double longest_shared_ms; /* the longest shared hold so far */
    double expect_ms;         /* the runner's estimate of its exclusive hold (0: none) */
} rn_gpu_locks;

/* Opens (creating if needed) the files of GPUs ids[0..n) in dir; ids are sorted and deduped.
 * marker: the file the state is written to (NULL: none). Returns 0, or -1 with err set. */
int rn_gpu_locks_open(rn_gpu_locks *l, const char *dir, const int *ids, int n, const char *marker,
                      char *err, int cap);
/* Takes every lock in mode (shared or exclusive), blocking. Returns 0, or -1 with err set
 * (nothing is held then). */
int rn_gpu_locks_acquire(rn_gpu_locks *l, int mode, char *err, int cap);
void rn_gpu_locks_release(rn_gpu_locks *l);
/* Takes every lock shared within timeout_ms, polling, without the turnstile: for a short hold
 * (the ranks' exit) that must never wait long. Returns 0, or -1 with nothing held. */
int rn_gpu_locks_try_shared(rn_gpu_locks *l, double timeout_ms);
void rn_gpu_locks_close(rn_gpu_locks *l);
/* Parses "0,1,3" into ids; returns the count, or -1 when malformed. */
int rn_gpu_lock_ids_parse(const char *s, int *ids, int cap);
/* The state names of the marker, by enum rn_lock_mode and waiting. */
const char *rn_gpu_lock_state_name(int mode, int waiting);

#ifdef __cplusplus
}
#endif
#endif
