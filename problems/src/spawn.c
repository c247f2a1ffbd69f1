/* Runs the harness's child processes (nvcc, pk-runner) through the sandbox (pk_sandbox_run).
 *
 * PKGYM_UNSANDBOXED=1 runs them directly instead (own process group, same wall limit and
 * output capture), for debugging the harness only; it says so on stderr every time. */
#define _GNU_SOURCE
#include "pk_harness_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct capture {
    int fd;
    pk_strbuf buf;
    size_t cap;
    int truncated;
} capture;

static void drain(capture *c) {
    char tmp[8192];
    ssize_t n = read(c->fd, tmp, sizeof tmp);
    if (n <= 0) {
        if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
            close(c->fd);
            c->fd = -1;
        }
        return;
    }
    pk_strbuf_append(&c->buf, tmp, (size_t)n);
    if (c->buf.len > 2 * c->cap) { /* keep the tail: the end of a log says what went wrong */
        memmove(c->buf.data, c->buf.data + c->buf.len - c->cap, c->cap);
        c->buf.len = c->cap;
        c->buf.data[c->buf.len] = 0;
        c->truncated = 1;
    }
}

static char *take_tail(capture *c, size_t *len) {
    if (c->buf.len > c->cap) {
        memmove(c->buf.data, c->buf.data + c->buf.len - c->cap, c->cap);
        c->buf.len = c->cap;
        c->buf.data[c->cap] = 0;
        c->truncated = 1;
    }
    *len = c->buf.len;
    return pk_strbuf_take(&c->buf);
}

static void child(const pk_sandbox_opts *o, char *const argv[], int out_w, int err_w) {
    setpgid(0, 0);
    int devnull = open("/dev/null", O_RDONLY);
    dup2(devnull, 0);
    dup2(out_w, 1);
    dup2(err_w, 2);
    if (o->workdir && chdir(o->workdir) != 0)
        _exit(127);
    for (const char *const *e = o->env_add; e && *e; e++)
        putenv((char *)*e);
    if (o->n_gpus) { /* what the sandbox would set */
        char list[64] = "";
        for (int i = 0; i < o->n_gpus && i < 8; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%d", i ? "," : "",
                     o->gpus[i]);
        setenv("CUDA_VISIBLE_DEVICES", list, 1);
        setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID", 1);
    }
    if (o->nice > 0)
        setpriority(PRIO_PROCESS, 0, getpriority(PRIO_PROCESS, 0) + o->nice);
    struct rlimit fs = {(rlim_t)(o->fsize_mb ? o->fsize_mb : 256) << 20,
                        (rlim_t)(o->fsize_mb ? o->fsize_mb : 256) << 20};
    setrlimit(RLIMIT_FSIZE, &fs);
    if (o->env) {
        for (const char *const *e = o->env; *e; e++)
            putenv((char *)*e);
    }
    execv(argv[0], argv);
    fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

static int spawn_direct(const pk_sandbox_opts *o, char *const argv[], pk_sandbox_result *res,
                        pk_error *err) {
    memset(res, 0, sizeof *res);
    int out_p[2], err_p[2];
    if (pipe2(out_p, O_CLOEXEC) || pipe2(err_p, O_CLOEXEC))
        return pk_error_errno(err, PK_ERR_SYSTEM, "pipe");
    double start = pk_now_ms();
    pid_t pid = fork();
    if (pid < 0)
        return pk_error_errno(err, PK_ERR_SYSTEM, "fork");
    if (pid == 0)
        child(o, argv, out_p[1], err_p[1]);
    setpgid(pid, pid);
    close(out_p[1]);
    close(err_p[1]);
    size_t cap = o->output_cap ? o->output_cap : PK_SANDBOX_DEFAULT_OUTPUT_CAP;
    capture cs[2] = {{out_p[0], {0}, cap, 0}, {err_p[0], {0}, cap, 0}};
    int wall = o->wall_ms > 0 ? o->wall_ms : PK_SANDBOX_DEFAULT_WALL_MS, status = 0, timed_out = 0,
        reaped = 0;
    while (!reaped) {
        struct pollfd pf[2];
        int n = 0;
        for (int i = 0; i < 2; i++)
            if (cs[i].fd >= 0)
                pf[n++] = (struct pollfd){cs[i].fd, POLLIN, 0};
        int left = wall - (int)(pk_now_ms() - start);
        double dl = o->deadline_ms ? pk_deadline_load(o->deadline_ms) : 0;
        if (dl > 0 && (int)(dl - pk_now_ms()) < left)
            left = (int)(dl - pk_now_ms());
        if (left <= 0 && !timed_out) {
            timed_out = 1;
            kill(-pid, SIGKILL); /* the whole group: mpirun and every rank */
        }
        if (n)
            poll(pf, (nfds_t)n, left > 0 ? (left < 50 ? left : 50) : 50);
        else
            usleep(2000);
        for (int i = 0; i < 2; i++)
            if (cs[i].fd >= 0)
                for (int k = 0; k < n; k++)
                    if (pf[k].fd == cs[i].fd && pf[k].revents)
                        drain(&cs[i]);
        if (waitpid(pid, &status, WNOHANG) == pid)
            reaped = 1;
    }
    kill(-pid, SIGKILL);          /* leftovers of the group (e.g. ranks whose parent died) */
    for (int i = 0; i < 2; i++) { /* non-blocking: a stray process may hold the pipe */
        if (cs[i].fd < 0)
            continue;
        fcntl(cs[i].fd, F_SETFL, O_NONBLOCK);
        for (int k = 0; k < 1024 && cs[i].fd >= 0 && cs[i].buf.len < 4 * cap; k++) {
            size_t before = cs[i].buf.len;
            drain(&cs[i]);
            if (cs[i].fd >= 0 && cs[i].buf.len == before)
                break;
        }
        if (cs[i].fd >= 0)
            close(cs[i].fd);
    }
    res->wall_ms = pk_now_ms() - start;
    res->out = take_tail(&cs[0], &res->out_len);
    res->err = take_tail(&cs[1], &res->err_len);
    res->truncated = cs[0].truncated || cs[1].truncated;
    if (timed_out) {
        res->status = PK_SB_TIMEOUT;
    } else if (WIFSIGNALED(status)) {
        res->status = PK_SB_SIGNAL;
        res->signal = WTERMSIG(status);
    } else {
        res->exit_code = WEXITSTATUS(status);
        res->status = res->exit_code ? PK_SB_EXIT : PK_SB_OK;
    }
    return PK_OK;
}

int pk_harness_compile_nice(void) {
    const char *v = getenv("PKGYM_COMPILE_NICE");
    int n = v && *v ? atoi(v) : PK_COMPILE_NICE;
    return n < 0 ? 0 : n > 19 ? 19 : n;
}

void pk_harness_spawn_free(pk_sandbox_result *res) {
    pk_sandbox_result_free(res);
}

int pk_harness_spawn(const pk_sandbox_opts *o, char *const argv[], pk_sandbox_result *res,
                     pk_error *err) {
    const char *direct = getenv("PKGYM_UNSANDBOXED");
    if (direct && strcmp(direct, "1") == 0) {
        fprintf(stderr, "pkgym: PKGYM_UNSANDBOXED=1: running %s WITHOUT the sandbox\n", argv[0]);
        return spawn_direct(o, argv, res, err);
    }
    return pk_sandbox_run(o, argv, res, err);
}
