/* Per-rank progress markers and crash markers, read by the harness after a timeout or crash.
 * Written with plain syscalls so the crash handler stays async-signal-safe. */
#include "pk_runner.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char crash_path[512];
static int crash_rank;

void rn_progress(const char *dir, int rank, const char *state, int trial) {
    if (!dir)
        return;
    char path[512], line[64];
    snprintf(path, sizeof path, "%s/rank%d.progress", dir, rank);
    int n = snprintf(line, sizeof line, "%s %d\n", state, trial);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return;
    if (write(fd, line, (size_t)n) < 0) {
        /* best effort: a missing marker only makes a timeout report less precise */
    }
    close(fd);
}

static void put_int(char *buf, size_t *len, int v) {
    char tmp[16];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v && n < 15);
    while (n)
        buf[(*len)++] = tmp[--n];
}

static void on_crash(int sig) {
    int fd = open(crash_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd >= 0) {
        char buf[32];
        size_t len = 0;
        put_int(buf, &len, crash_rank);
        buf[len++] = ' ';
        put_int(buf, &len, sig);
        buf[len++] = '\n';
        if (write(fd, buf, len) < 0) {
            /* nothing more can be done inside a signal handler */
        }
        close(fd);
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

void rn_crash_markers_install(const char *dir, int rank) {
    if (!dir)
        return;
    snprintf(crash_path, sizeof crash_path, "%s/rank%d.crash", dir, rank);
    crash_rank = rank;
    int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++)
        signal(sigs[i], on_crash);
}

void rn_setup_done_marker(void) {
    static const char marker[] = PK_RUNNER_SETUP_DONE;
    fflush(stderr); /* what stdio holds goes first, so the marker is one write of its own */
    if (write(2, marker, sizeof marker - 1) < 0) {
        /* no stderr: the run's failures then count as ours, and are retried, never scored */
    }
}

int rn_wait_go(const char *dir) {
    char go[512], abort_path[512];
    snprintf(go, sizeof go, "%s/go", dir);
    snprintf(abort_path, sizeof abort_path, "%s/abort", dir);
    const struct timespec tick = {0, 500 * 1000}; /* 0.5 ms: the latency go adds to a run */
    for (;;) {
        if (access(abort_path, F_OK) == 0)
            return 0;
        if (access(go, F_OK) == 0)
            return 1;
        nanosleep(&tick, NULL);
    }
}
