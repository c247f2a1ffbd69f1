/* The runner's phases that hold the GPU locks (rn_gpu_lock.h): rank 0 takes the job's locks,
 * the other ranks wait for it in a rank broadcast, and the locks go back only after every
 * rank has finished the phase's GPU work (a rank barrier). Under MPI, whose barriers spin,
 * the other ranks first sleep until rank 0 says it is through (a file in the progress dir),
 * so a job waiting for another's timing does not take CPU from it. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pk_runner.h"
#include "rn_gpu_lock.h"

static unsigned g_phase; /* every rank: phases begun that take the locks */

static void phase_path(const rank_state *rs, char *out, size_t cap) {
    snprintf(out, cap, "%s/lockphase", rs->o->progress_dir);
}

/* Rank 0, once it holds the locks (or gave up): "<phase>\n", renamed into place. */
static void say_through(const rank_state *rs) {
    char path[600], tmp[610], line[24];
    phase_path(rs, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int n = snprintf(line, sizeof line, "%u\n", g_phase);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return;
    int ok = write(fd, line, (size_t)n) == n;
    close(fd);
    if (ok)
        rename(tmp, path);
}

/* The other ranks: sleep until rank 0 is through this phase. Unbounded here: the harness's
 * deadline bounds the run. */
static void wait_through(const rank_state *rs) {
    char path[600], buf[24];
    phase_path(rs, path, sizeof path);
    const struct timespec tick = {0, 200 * 1000};
    for (;;) {
        int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        if (fd >= 0) {
            ssize_t n = read(fd, buf, sizeof buf - 1);
            close(fd);
            if (n > 0) {
                buf[n] = 0;
                if (strtoul(buf, NULL, 10) >= g_phase)
                    return;
            }
        }
        nanosleep(&tick, NULL);
    }
}

/* The runner's phases. One job per process: the state is static. */
static rn_gpu_locks g_locks;
static int g_opened; /* 1 opened, -1 failed (err in g_err) */
static char g_err[300];

static int g_active; /* every rank: the phase begun last takes the locks */

static int locking(const rank_state *rs) {
    return rs->o->lock_dir && rs->o->n_lock_ids > 0;
}

int rn_gpu_phase_begin(rank_state *rs, int mode, rank_step *st) {
    g_active = locking(rs) && mode != RN_LOCK_NONE;
    if (!g_active)
        return 0;
    struct {
        int ok;
        char err[200];
    } out = {1, ""};
    if (rs->g->rank == 0) {
        if (!g_opened) {
            char marker[600];
            snprintf(marker, sizeof marker, "%s/locks",
                     rs->o->progress_dir ? rs->o->progress_dir : ".");
            g_opened =
                rn_gpu_locks_open(&g_locks, rs->o->lock_dir, rs->o->lock_ids, rs->o->n_lock_ids,
                                  rs->o->progress_dir ? marker : NULL, g_err, sizeof g_err) == 0
                    ? 1
                    : -1;
        }
        if (g_opened < 0 || rn_gpu_locks_acquire(&g_locks, mode, g_err, sizeof g_err) != 0) {
            out.ok = 0;
            snprintf(out.err, sizeof out.err, "%.199s", g_err);
        }
    }
    g_phase++;
    int spinning_barriers = rs->o->launcher && !strcmp(rs->o->launcher, "mpi");
    if (spinning_barriers && rs->o->progress_dir) {
        if (rs->g->rank == 0)
            say_through(rs);
        else
            wait_through(rs);
    }
    /* Everyone waits here until rank 0 holds the locks (or failed to take them). */
    if (rn_group_broadcast(rs->g, &out, sizeof out, 0))
        return rn_fail(st, "rank broadcast failed");
    if (!out.ok)
        return rn_fail(st, "%s", out.err);
    return 0;
}

void rn_gpu_phase_end(rank_state *rs) {
    if (!g_active)
        return;
    g_active = 0;
    rs->g->barrier(rs->g); /* every rank's GPU work of the phase is done */
    if (rs->g->rank == 0)
        rn_gpu_locks_release(&g_locks);
}

void rn_gpu_phase_expect(double ms) {
    g_locks.expect_ms = ms > 0 ? ms : 0;
}

double rn_gpu_lock_wait_ms(void) {
    return g_locks.wait_ms;
}
