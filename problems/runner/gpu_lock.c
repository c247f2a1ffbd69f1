/* Per-GPU timing locks: the protocol of rn_gpu_lock.h (turnstile for writer preference,
 * ascending order for deadlock freedom, a marker for the harness). The runner's phases that
 * hold them are in gpu_phase.c. */
#define _GNU_SOURCE
#include "rn_gpu_lock.h"

#include "pk_common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

const char *rn_gpu_lock_state_name(int mode, int waiting) {
    if (mode == RN_LOCK_SHARED)
        return waiting ? "wait-shared" : "shared";
    if (mode == RN_LOCK_SETUP)
        return waiting ? "wait-shared" : "setup";
    if (mode == RN_LOCK_EXCLUSIVE)
        return waiting ? "wait-exclusive" : "exclusive";
    return "none";
}

/* Written to a temporary name and renamed, so the harness never reads half a line. The work
 * dir is the candidate's too: never follow a link it may have left. */
static void write_marker(rn_gpu_locks *l, int mode, int waiting, double since) {
    if (!l->marker[0])
        return;
    char tmp[600], line[128];
    snprintf(tmp, sizeof tmp, "%s.tmp", l->marker);
    int n = snprintf(line, sizeof line, "%u %s %.3f %.3f %.3f %.3f\n", ++l->seq,
                     rn_gpu_lock_state_name(mode, waiting), since, l->longest_shared_ms, l->wait_ms,
                     l->expect_ms);
    if (n < 0 || n >= (int)sizeof line)
        return;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return;
    int ok = write(fd, line, (size_t)n) == n;
    close(fd);
    if (ok && rename(tmp, l->marker) != 0)
        unlink(tmp);
}

static int cmp_int(const void *a, const void *b) {
    return *(const int *)a - *(const int *)b;
}

int rn_gpu_lock_ids_parse(const char *s, int *ids, int cap) {
    int n = 0;
    while (s && *s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 0 || v > 1 << 20 || n == cap || (*end && *end != ','))
            return -1;
        ids[n++] = (int)v;
        s = *end ? end + 1 : end;
    }
    return n;
}

static int open_file(const char *dir, int id, const char *ext, char *err, int cap) {
    char path[600];
    snprintf(path, sizeof path, "%s/gpu%d.%s", dir, id, ext);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    struct stat st;
    if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
        close(fd);
        fd = -1;
        errno = EINVAL;
    }
    if (fd < 0)
        snprintf(err, (size_t)cap, "cannot open the GPU lock %s: %s", path, strerror(errno));
    return fd;
}

int rn_gpu_locks_open(rn_gpu_locks *l, const char *dir, const int *ids, int n, const char *marker,
                      char *err, int cap) {
    memset(l, 0, sizeof *l);
    for (int i = 0; i < RN_LOCK_MAX; i++)
        l->turn_fd[i] = l->lock_fd[i] = -1;
    if (n < 0 || n > RN_LOCK_MAX) {
        snprintf(err, (size_t)cap, "%d GPU locks (at most %d)", n, RN_LOCK_MAX);
        return -1;
    }
    int sorted[RN_LOCK_MAX];
    memcpy(sorted, ids, (size_t)n * sizeof *ids);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_int);
    for (int i = 0; i < n; i++)
        if (l->n == 0 || l->ids[l->n - 1] != sorted[i])
            l->ids[l->n++] = sorted[i];
    if (marker)
        snprintf(l->marker, sizeof l->marker, "%s", marker);
    for (int i = 0; i < l->n; i++) {
        l->turn_fd[i] = open_file(dir, l->ids[i], "turnstile", err, cap);
        l->lock_fd[i] = l->turn_fd[i] < 0 ? -1 : open_file(dir, l->ids[i], "lock", err, cap);
        if (l->lock_fd[i] < 0) {
            rn_gpu_locks_close(l);
            return -1;
        }
    }
    return 0;
}

static int lock_fd(int fd, int op) {
    int rc;
    while ((rc = flock(fd, op)) != 0 && errno == EINTR) {
    }
    return rc;
}

int rn_gpu_locks_acquire(rn_gpu_locks *l, int mode, char *err, int cap) {
    if (l->held)
        rn_gpu_locks_release(l);
    double t0 = pk_now_ms();
    write_marker(l, mode, 1, t0);
    for (int i = 0; i < l->n; i++) {
        /* Writer: turnstile, lock, let the turnstile go (new readers queue behind it while
         * it waits). Reader: through the turnstile, then the lock shared. */
        int ok = lock_fd(l->turn_fd[i], LOCK_EX) == 0;
        if (ok && mode == RN_LOCK_EXCLUSIVE) {
            ok = lock_fd(l->lock_fd[i], LOCK_EX) == 0;
            lock_fd(l->turn_fd[i], LOCK_UN);
        } else if (ok) { /* shared, set-up included */
            lock_fd(l->turn_fd[i], LOCK_UN);
            ok = lock_fd(l->lock_fd[i], LOCK_SH) == 0;
        }
        if (!ok) {
            snprintf(err, (size_t)cap, "cannot take the lock of GPU %d: %s", l->ids[i],
                     strerror(errno));
            for (int k = i - 1; k >= 0; k--)
                lock_fd(l->lock_fd[k], LOCK_UN);
            write_marker(l, RN_LOCK_NONE, 0, pk_now_ms());
            return -1;
        }
    }
    l->held_since = pk_now_ms();
    l->wait_ms += l->held_since - t0;
    l->held = mode;
    write_marker(l, mode, 0, l->held_since);
    return 0;
}

int rn_gpu_locks_try_shared(rn_gpu_locks *l, double timeout_ms) {
    if (l->held)
        rn_gpu_locks_release(l);
    double t0 = pk_now_ms();
    const struct timespec tick = {0, 2 * 1000 * 1000};
    for (int i = 0; i < l->n; i++)
        while (flock(l->lock_fd[i], LOCK_SH | LOCK_NB) != 0) {
            if (pk_now_ms() - t0 > timeout_ms) {
                for (int k = i - 1; k >= 0; k--)
                    lock_fd(l->lock_fd[k], LOCK_UN);
                return -1;
            }
            nanosleep(&tick, NULL);
        }
    l->held_since = pk_now_ms();
    l->held = RN_LOCK_SHARED;
    return 0;
}

void rn_gpu_locks_release(rn_gpu_locks *l) {
    if (!l->held)
        return;
    for (int i = l->n - 1; i >= 0; i--)
        lock_fd(l->lock_fd[i], LOCK_UN);
    double now = pk_now_ms();
    if (l->held == RN_LOCK_SHARED && now - l->held_since > l->longest_shared_ms)
        l->longest_shared_ms = now - l->held_since;
    l->held = RN_LOCK_NONE;
    write_marker(l, RN_LOCK_NONE, 0, now);
}

void rn_gpu_locks_close(rn_gpu_locks *l) {
    rn_gpu_locks_release(l);
    for (int i = 0; i < RN_LOCK_MAX; i++) {
        if (l->turn_fd[i] >= 0)
            close(l->turn_fd[i]);
        if (l->lock_fd[i] >= 0)
            close(l->lock_fd[i]);
        l->turn_fd[i] = l->lock_fd[i] = -1;
    }
    l->n = 0;
}
