/* The per-GPU timing locks (problems/runner/rn_gpu_lock.h) between real processes: shared
 * holders coexist, an exclusive holder excludes everyone, a waiting writer is not starved by
 * later readers (writer preference), random multi-GPU lock sets never deadlock and never
 * break the invariants, a dead holder's locks come back, the marker tells the harness the
 * state, and the runner's phases (gpu_phase.c) keep every rank out until rank 0 holds. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "pk_runner.h"
#include "rn_gpu_lock.h"

#define N_GPUS 4

typedef struct shared {
    int readers[N_GPUS], writers[N_GPUS];
    int max_readers;
    int violations;
    double t[8]; /* event times, per test */
    int done;
} shared;

static shared *sh;
static char dir[64];

static void sleep_ms(double ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)((ms - 1000 * (int)(ms / 1000)) * 1e6)};
    nanosleep(&ts, NULL);
}

static int setup(void **state) {
    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    snprintf(dir, sizeof dir, "/tmp/pk-test-gpu-lock-XXXXXX");
    return sh == MAP_FAILED || !mkdtemp(dir) ? -1 : 0;
}

static int teardown(void **state) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static int reset(void **state) {
    memset(sh, 0, sizeof *sh);
    return 0;
}

/* Enter/leave the "GPU" while holding its locks, checking the invariants. */
static void enter(const int *ids, int n, int mode) {
    for (int i = 0; i < n; i++) {
        int g = ids[i];
        if (mode == RN_LOCK_EXCLUSIVE) {
            if (__atomic_add_fetch(&sh->writers[g], 1, __ATOMIC_SEQ_CST) != 1 ||
                __atomic_load_n(&sh->readers[g], __ATOMIC_SEQ_CST) != 0)
                __atomic_add_fetch(&sh->violations, 1, __ATOMIC_SEQ_CST);
        } else {
            int r = __atomic_add_fetch(&sh->readers[g], 1, __ATOMIC_SEQ_CST);
            if (__atomic_load_n(&sh->writers[g], __ATOMIC_SEQ_CST) != 0)
                __atomic_add_fetch(&sh->violations, 1, __ATOMIC_SEQ_CST);
            int m = __atomic_load_n(&sh->max_readers, __ATOMIC_SEQ_CST);
            while (r > m && !__atomic_compare_exchange_n(&sh->max_readers, &m, r, 0,
                                                         __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
            }
        }
    }
}

static void leave(const int *ids, int n, int mode) {
    for (int i = 0; i < n; i++)
        __atomic_sub_fetch(mode == RN_LOCK_EXCLUSIVE ? &sh->writers[ids[i]] : &sh->readers[ids[i]],
                           1, __ATOMIC_SEQ_CST);
}

/* Child: lock ids in mode, stamp t[slot] when held, hold for hold_ms, release. */
static pid_t spawn_holder(const int *ids, int n, int mode, double hold_ms, int slot,
                          const char *marker) {
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    rn_gpu_locks l;
    char err[256];
    if (rn_gpu_locks_open(&l, dir, ids, n, marker, err, sizeof err) ||
        rn_gpu_locks_acquire(&l, mode, err, sizeof err))
        _exit(2);
    if (slot >= 0)
        sh->t[slot] = pk_now_ms();
    enter(ids, n, mode);
    sleep_ms(hold_ms);
    leave(ids, n, mode);
    if (slot >= 0)
        sh->t[slot + 1] = pk_now_ms();
    rn_gpu_locks_close(&l);
    _exit(0);
}

/* Waits for pid; 0 when it exited 0 within timeout_ms (else it is killed). */
static int reap(pid_t pid, double timeout_ms) {
    double end = pk_now_ms() + timeout_ms;
    int status;
    while (pk_now_ms() < end) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
        sleep_ms(2);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -1;
}

/* 1 when somebody holds gpu<id>.<ext> (a non-blocking exclusive try fails). */
static int held_by_other(int id, const char *ext) {
    char path[128];
    snprintf(path, sizeof path, "%s/gpu%d.%s", dir, id, ext);
    int fd = open(path, O_RDONLY | O_CREAT, 0600);
    int busy = flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    close(fd);
    return busy;
}

static void test_ids_parse_sort_dedupe(void **state) {
    int ids[8];
    assert_int_equal(rn_gpu_lock_ids_parse("3,1,1,0", ids, 8), 4);
    assert_int_equal(rn_gpu_lock_ids_parse("", ids, 8), 0);
    assert_int_equal(rn_gpu_lock_ids_parse("1,x", ids, 8), -1);
    assert_int_equal(rn_gpu_lock_ids_parse("-1", ids, 8), -1);
    assert_int_equal(rn_gpu_lock_ids_parse("1,2,3", ids, 2), -1);
    rn_gpu_locks l;
    char err[256];
    int in[4] = {3, 1, 1, 0};
    assert_int_equal(rn_gpu_locks_open(&l, dir, in, 4, NULL, err, sizeof err), 0);
    assert_int_equal(l.n, 3); /* ascending, once each: the order that makes it deadlock-free */
    assert_int_equal(l.ids[0], 0);
    assert_int_equal(l.ids[1], 1);
    assert_int_equal(l.ids[2], 3);
    rn_gpu_locks_close(&l);
    assert_int_equal(rn_gpu_locks_open(&l, "/nonexistent/dir", in, 1, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "GPU lock"));
}

static void test_shared_coexist_exclusive_excludes(void **state) {
    int g[2] = {0, 1};
    pid_t r1 = spawn_holder(g, 2, RN_LOCK_SHARED, 300, 0, NULL);
    pid_t r2 = spawn_holder(g, 2, RN_LOCK_SHARED, 300, 2, NULL);
    assert_int_equal(reap(r1, 5000), 0);
    assert_int_equal(reap(r2, 5000), 0);
    assert_int_equal(sh->max_readers, 2); /* both held it at once */
    assert_true(sh->t[2] < sh->t[1] && sh->t[0] < sh->t[3]);
    /* An exclusive holder on GPU 1 keeps a reader of GPUs 0 and 1 out until it is done. */
    pid_t w = spawn_holder(&g[1], 1, RN_LOCK_EXCLUSIVE, 300, 4, NULL);
    while (!held_by_other(1, "lock"))
        sleep_ms(1);
    pid_t r = spawn_holder(g, 2, RN_LOCK_SHARED, 10, 6, NULL);
    assert_int_equal(reap(w, 5000), 0);
    assert_int_equal(reap(r, 5000), 0);
    assert_true(sh->t[6] >= sh->t[5]);
    assert_int_equal(sh->violations, 0);
}

/* R1 holds shared; W waits for exclusive; R2 comes after W started waiting. R2 must not get
 * in before W (a plain reader-writer flock would let it in at once, and a stream of such
 * readers would starve timing forever). */
static void test_writer_preference(void **state) {
    int g0 = 0;
    pid_t r1 = spawn_holder(&g0, 1, RN_LOCK_SHARED, 400, 0, NULL);
    while (!held_by_other(0, "lock"))
        sleep_ms(1);
    pid_t w = spawn_holder(&g0, 1, RN_LOCK_EXCLUSIVE, 200, 2, NULL);
    while (!held_by_other(0, "turnstile")) /* W waits for the lock holding the turnstile */
        sleep_ms(1);
    double r2_start = pk_now_ms();
    pid_t r2 = spawn_holder(&g0, 1, RN_LOCK_SHARED, 10, 4, NULL);
    assert_int_equal(reap(r1, 5000), 0);
    assert_int_equal(reap(w, 5000), 0);
    assert_int_equal(reap(r2, 5000), 0);
    assert_true(sh->t[4] > r2_start);
    assert_true(sh->t[2] >= sh->t[1]); /* W after R1 let go */
    assert_true(sh->t[4] >= sh->t[3]); /* R2 only after W was done */
    assert_int_equal(sh->violations, 0);
}

/* Many processes, random GPU subsets (given in random order) and modes: every one finishes
 * (no deadlock) and no invariant is ever broken. */
static void test_random_sets_no_deadlock(void **state) {
    enum { PROCS = 12, ITERS = 150 };
    pid_t kids[PROCS];
    for (int p = 0; p < PROCS; p++) {
        kids[p] = fork();
        if (kids[p] != 0)
            continue;
        unsigned seed = 1234u + 77u * (unsigned)p;
        for (int it = 0; it < ITERS; it++) {
            int ids[N_GPUS], n = 0;
            for (int g = 0; g < N_GPUS; g++)
                if (rand_r(&seed) % 2)
                    ids[n++] = g;
            if (n == 0)
                ids[n++] = rand_r(&seed) % N_GPUS;
            int reverse = rand_r(&seed) % 2;
            for (int i = 0; reverse && i < n / 2; i++) { /* descending half the time */
                int tmp = ids[i];
                ids[i] = ids[n - 1 - i];
                ids[n - 1 - i] = tmp;
            }
            int mode = rand_r(&seed) % 2 == 0 ? RN_LOCK_EXCLUSIVE : RN_LOCK_SHARED;
            rn_gpu_locks l;
            char err[256];
            if (rn_gpu_locks_open(&l, dir, ids, n, NULL, err, sizeof err) ||
                rn_gpu_locks_acquire(&l, mode, err, sizeof err))
                _exit(2);
            enter(l.ids, l.n, mode);
            sleep_ms((double)(rand_r(&seed) % 500) / 1000.0);
            leave(l.ids, l.n, mode);
            rn_gpu_locks_close(&l);
        }
        _exit(0);
    }
    for (int p = 0; p < PROCS; p++)
        assert_int_equal(reap(kids[p], 30000), 0);
    assert_int_equal(sh->violations, 0);
}

static void test_dead_holder_releases(void **state) {
    int g = 2;
    pid_t pid = fork();
    if (pid == 0) {
        rn_gpu_locks l;
        char err[256];
        if (rn_gpu_locks_open(&l, dir, &g, 1, NULL, err, sizeof err) ||
            rn_gpu_locks_acquire(&l, RN_LOCK_EXCLUSIVE, err, sizeof err))
            _exit(2);
        kill(getpid(), SIGKILL); /* dies holding it */
        _exit(3);
    }
    int status;
    waitpid(pid, &status, 0);
    assert_true(WIFSIGNALED(status));
    pid_t w = spawn_holder(&g, 1, RN_LOCK_EXCLUSIVE, 1, 0, NULL);
    assert_int_equal(reap(w, 2000), 0);
}

static double m_since, m_longest, m_waited;

static void read_marker(const char *path, unsigned *seq, char *state) {
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    assert_int_equal(fscanf(f, "%u %31s %lf %lf %lf", seq, state, &m_since, &m_longest, &m_waited),
                     5);
    fclose(f);
}

static void test_marker_states(void **state) {
    char marker[128], st[32];
    unsigned seq = 0, seq2 = 0;
    snprintf(marker, sizeof marker, "%s/locks", dir);
    int g = 3;
    rn_gpu_locks l;
    char err[256];
    assert_int_equal(rn_gpu_locks_open(&l, dir, &g, 1, marker, err, sizeof err), 0);
    /* Somebody else holds it exclusively: the marker says we wait. */
    pid_t w = spawn_holder(&g, 1, RN_LOCK_EXCLUSIVE, 300, -1, NULL);
    while (!held_by_other(3, "lock"))
        sleep_ms(1);
    pid_t me = fork();
    if (me == 0) {
        if (rn_gpu_locks_acquire(&l, RN_LOCK_SHARED, err, sizeof err))
            _exit(2);
        sleep_ms(600);
        rn_gpu_locks_release(&l);
        _exit(l.wait_ms > 100 ? 0 : 4); /* the wait was measured */
    }
    sleep_ms(100);
    read_marker(marker, &seq, st);
    assert_string_equal(st, "wait-shared");
    sleep_ms(300);
    read_marker(marker, &seq2, st);
    assert_string_equal(st, "shared");
    assert_true(seq2 > seq);
    assert_int_equal(reap(me, 5000), 0);
    assert_int_equal(reap(w, 5000), 0);
    read_marker(marker, &seq, st);
    assert_string_equal(st, "none");
    /* The runner's own figures: it waited ~200 ms, then held it shared for 600 ms. */
    assert_true(m_waited > 100 && m_waited < 1000);
    assert_true(m_longest >= 590 && m_longest < 2000);
    assert_true(m_since > 0 && m_since <= pk_now_ms());
    rn_gpu_locks_close(&l);
}

/* The runner's phase: rank 0 takes the locks and no rank runs the phase before it holds. */
static void test_phase_waits_for_rank0(void **state) {
    int g[2] = {0, 1};
    pid_t w = spawn_holder(&g[1], 1, RN_LOCK_EXCLUSIVE, 300, 0, NULL);
    while (!held_by_other(1, "lock"))
        sleep_ms(1);
    pid_t runner = fork();
    if (runner == 0) {
        rn_group grp;
        memset(&grp, 0, sizeof grp);
        pid_t kids[2];
        int who = rn_group_fork_init(&grp, 2, kids);
        if (who == 0) {
            rn_opts o;
            memset(&o, 0, sizeof o);
            o.lock_dir = dir;
            o.lock_ids[0] = 1;
            o.lock_ids[1] = 0;
            o.n_lock_ids = 2;
            rank_state rs;
            memset(&rs, 0, sizeof rs);
            rs.o = &o;
            rs.g = &grp;
            rank_step st = {0};
            if (rn_gpu_phase_begin(&rs, RN_LOCK_SHARED, &st) != 0)
                _exit(2);
            sh->t[2 + grp.rank] = pk_now_ms(); /* both ranks: only after the writer let go */
            rn_gpu_phase_end(&rs);
            _exit(0);
        }
        int ok = who == 1;
        for (int i = 0; i < 2; i++) {
            int status;
            ok &= waitpid(kids[i], &status, 0) == kids[i] && WIFEXITED(status) &&
                  WEXITSTATUS(status) == 0;
        }
        _exit(ok ? 0 : 1);
    }
    assert_int_equal(reap(w, 5000), 0);
    assert_int_equal(reap(runner, 5000), 0);
    assert_true(sh->t[2] >= sh->t[1]);
    assert_true(sh->t[3] >= sh->t[1]);
    /* Without a lock dir the phase is free and takes no barrier. */
    rn_opts o;
    memset(&o, 0, sizeof o);
    rank_state rs;
    memset(&rs, 0, sizeof rs);
    rs.o = &o;
    rank_step st = {0};
    assert_int_equal(rn_gpu_phase_begin(&rs, RN_LOCK_EXCLUSIVE, &st), 0);
    rn_gpu_phase_end(&rs);
}

/* A "runner" of 2 ranks over GPU 0 with the exit hold: each rank stamps t[2 + rank] at the
 * exit gate and t[4 + rank] past it; rank 1 then lives linger_ms more. Returns its pid. */
static pid_t fork_exit_runner(double linger_ms) {
    pid_t runner = fork();
    if (runner != 0)
        return runner;
    rn_group grp;
    memset(&grp, 0, sizeof grp);
    pid_t kids[2];
    int who = rn_group_fork_init(&grp, 2, kids);
    if (who == 0) {
        sh->t[2 + grp.rank] = pk_now_ms();
        rn_group_fork_exit_gate(&grp);
        sh->t[4 + grp.rank] = pk_now_ms();
        if (grp.rank == 1)
            sleep_ms(linger_ms);
        _exit(0);
    }
    rn_opts o;
    memset(&o, 0, sizeof o);
    o.lock_dir = dir;
    o.lock_ids[0] = 0;
    o.n_lock_ids = 1;
    int ok = who == 1 && rn_group_fork_hold_exit(&grp, &o) == 0;
    for (int i = 0; i < 2; i++) {
        int status;
        ok &= waitpid(kids[i], &status, 0) == kids[i] && WIFEXITED(status) &&
              WEXITSTATUS(status) == 0;
    }
    _exit(ok ? 0 : 1);
}

/* --lock-exit: the fork launcher's ranks exit only while their supervisor holds the locks
 * shared, so the driver's teardown at exit never overlaps another job's timing. A writer
 * (another job timing) holds GPU 0; the ranks reach the exit gate at once but pass it only
 * after the writer let go, and while the last rank is still alive the lock is held shared. */
static void test_exit_waits_for_timing_and_holds_shared(void **state) {
    int g0 = 0;
    pid_t w = spawn_holder(&g0, 1, RN_LOCK_EXCLUSIVE, 300, 0, NULL);
    while (!held_by_other(0, "lock"))
        sleep_ms(1);
    pid_t runner = fork_exit_runner(300); /* rank 1 alive: the supervisor must hold the lock */
    double deadline = pk_now_ms() + 5000;
    while (sh->t[5] == 0 && pk_now_ms() < deadline)
        sleep_ms(1);
    assert_true(sh->t[5] > 0);
    assert_true(held_by_other(0, "lock")); /* rank 1 is alive: held shared for its exit */
    assert_int_equal(reap(w, 5000), 0);
    assert_int_equal(reap(runner, 5000), 0);
    assert_true(sh->t[2] < sh->t[1] && sh->t[3] < sh->t[1]);   /* at the gate during timing */
    assert_true(sh->t[4] >= sh->t[1] && sh->t[5] >= sh->t[1]); /* through it only after */
    assert_false(held_by_other(0, "lock"));                    /* gone with the supervisor */
}

/* A neighbour's timing that holds the GPUs for long does not keep the ranks from exiting past
 * the exit hold's bound (2 s): they go without the locks, well before the writer lets go. */
static void test_exit_hold_is_bounded(void **state) {
    int g0 = 0;
    pid_t w = spawn_holder(&g0, 1, RN_LOCK_EXCLUSIVE, 4000, 0, NULL);
    while (!held_by_other(0, "lock"))
        sleep_ms(1);
    pid_t runner = fork_exit_runner(0);
    assert_int_equal(reap(runner, 10000), 0);
    assert_int_equal(reap(w, 10000), 0);
    double waited = sh->t[4] - sh->t[2];
    assert_true(waited >= 1900 && waited < 3500);
    assert_true(sh->t[4] < sh->t[1] && sh->t[5] < sh->t[1]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_ids_parse_sort_dedupe, reset),
        cmocka_unit_test_setup(test_shared_coexist_exclusive_excludes, reset),
        cmocka_unit_test_setup(test_writer_preference, reset),
        cmocka_unit_test_setup(test_random_sets_no_deadlock, reset),
        cmocka_unit_test_setup(test_dead_holder_releases, reset),
        cmocka_unit_test_setup(test_marker_states, reset),
        cmocka_unit_test_setup(test_phase_waits_for_rank0, reset),
        cmocka_unit_test_setup(test_exit_waits_for_timing_and_holds_shared, reset),
        cmocka_unit_test_setup(test_exit_hold_is_bounded, reset),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
