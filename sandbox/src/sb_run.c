/* pk_sandbox_run: prepares a job, clones it into new namespaces, supervises it from outside
 * (wall time, CPU time, output floods) and turns what happened into a verdict. Thread-safe:
 * no signal handlers, no global state but the once-built seccomp program and a counter, and
 * the only process ever waited for is our own child, by pid. */
#define _GNU_SOURCE
#include "sb_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* Past the cap, output is counted but not kept; this much more ends the job. */
#define SB_FLOOD_BYTES (64L * 1024 * 1024)

typedef enum sb_kill_reason {
    SB_KILL_NONE,
    SB_KILL_WALL,
    SB_KILL_CPU,
    SB_KILL_OUTPUT
} sb_kill_reason;

typedef struct sb_stream {
    int fd;
    pk_strbuf kept;
    size_t total;
} sb_stream;

typedef struct sb_job {
    const pk_sandbox_opts *opts;
    int wall_ms, pids, nofile;
    long fsize_mb;
    size_t cap;
    char *workdir;
    int own_workdir;
    sb_plan plan;
    int have_plan;
    char **env;
    sb_cgroup cg;
    int pid, pidfd;
    sb_stream out, err;
    int status_fd, stdin_fd;
    size_t stdin_off;
    sb_record rec; /* the first record received */
    int have_rec;
    char rec_buf[sizeof(sb_record)];
    size_t rec_len;
    sb_kill_reason killed;
    int wstatus;
    struct rusage ru;
} sb_job;

/* Truncation is intended: details and notes are bounded summaries. */
static void __attribute__((format(printf, 3, 4)))
bounded(char *dst, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst, cap, fmt, ap);
    va_end(ap);
}

static void __attribute__((format(printf, 2, 3)))
set_setup_error(pk_sandbox_result *res, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    res->status = PK_SB_SETUP_ERROR;
    vsnprintf(res->detail, sizeof res->detail, fmt, ap);
    va_end(ap);
}

static int prepare_workdir(sb_job *j, pk_sandbox_result *res) {
    if (j->opts->workdir) {
        struct stat st;
        char *real = realpath(j->opts->workdir, NULL);
        if (!real || stat(real, &st) || !S_ISDIR(st.st_mode)) {
            free(real);
            set_setup_error(res, "workdir %s: not a directory", j->opts->workdir);
            return -1;
        }
        j->workdir = real;
        return 0;
    }
    const char *base = getenv("PKGYM_SANDBOX_TMP");
    char tmpl[4096];
    snprintf(tmpl, sizeof tmpl, "%s/pk-sbwork-%d-XXXXXX", base && *base ? base : "/tmp",
             (int)getpid());
    if (!mkdtemp(tmpl)) {
        set_setup_error(res, "mkdtemp %s: %s", tmpl, strerror(errno));
        return -1;
    }
    j->workdir = strdup(tmpl);
    j->own_workdir = 1;
    if (!j->workdir) {
        rmdir(tmpl);
        set_setup_error(res, "out of memory");
        return -1;
    }
    return 0;
}

static void describe_limits(sb_job *j, pk_sandbox_result *res, int use_as) {
    const sb_cgroup *cg = &j->cg;
    const char *v = cg->version == 2 ? "cgroup-v2" : "cgroup-v1";
    char mem[96], pids[64];
    if (j->opts->mem_mb <= 0)
        snprintf(mem, sizeof mem, "unlimited");
    else if (cg->has_mem)
        snprintf(mem, sizeof mem, "%s", v);
    else if (use_as)
        snprintf(mem, sizeof mem, "rlimit-as");
    else
        snprintf(mem, sizeof mem, "NOT-APPLIED(no memory cgroup; RLIMIT_AS unusable with CUDA)");
    snprintf(pids, sizeof pids, "%s%s", cg->has_pids ? v : "", cg->has_pids ? "+rlimit" : "rlimit");
    bounded(res->limits, sizeof res->limits, "wall=supervisor cpu=rlimit%s%s memory=%s pids=%s%s%s",
            cg->has_cpu ? "+" : "", cg->has_cpu ? v : "", mem, pids, cg->note[0] ? " note=" : "",
            cg->note);
}

static void fill_child_args(sb_job *j, sb_child_args *a, const struct sock_fprog *prog,
                            char *const argv[], int use_as) {
    const pk_sandbox_opts *o = j->opts;
    memset(a, 0, sizeof *a);
    a->plan = &j->plan;
    a->workdir = j->workdir;
    a->seccomp = prog;
    a->argv = argv;
    a->envp = j->env;
    if (o->cpu_ms > 0) {
        rlim_t s = (rlim_t)((o->cpu_ms + 999) / 1000);
        a->cpu = (struct rlimit){s, s + 1};
    } else {
        a->cpu = (struct rlimit){RLIM_INFINITY, RLIM_INFINITY};
    }
    rlim_t fs = (rlim_t)j->fsize_mb * 1024 * 1024;
    a->fsize = (struct rlimit){fs, fs};
    a->nofile = (struct rlimit){(rlim_t)j->nofile, (rlim_t)j->nofile};
    a->nproc = (struct rlimit){(rlim_t)j->pids, (rlim_t)j->pids};
    a->set_as = use_as;
    a->nice = o->nice > 0 ? (o->nice > 19 ? 19 : o->nice) : 0;
    rlim_t as = (rlim_t)o->mem_mb * 1024 * 1024;
    a->as = (struct rlimit){as, as};
}

static int write_proc(int pid, const char *file, const char *value) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/%s", pid, file);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = write(fd, value, strlen(value));
    close(fd);
    return n == (ssize_t)strlen(value) ? 0 : -1;
}

/* Maps uid/gid 0 inside to our own ids outside: works as root and unprivileged alike. */
static int map_ids(int pid) {
    char m[64];
    if (write_proc(pid, "setgroups", "deny") && errno != ENOENT)
        return -1;
    snprintf(m, sizeof m, "0 %u 1\n", (unsigned)geteuid());
    if (write_proc(pid, "uid_map", m))
        return -1;
    snprintf(m, sizeof m, "0 %u 1\n", (unsigned)getegid());
    return write_proc(pid, "gid_map", m);
}

static void kill_job(sb_job *j, sb_kill_reason why) {
    if (j->killed == SB_KILL_NONE)
        j->killed = why;
    kill(j->pid, SIGKILL); /* the namespace's init: the kernel kills the rest */
}

static void trim_to_tail(pk_strbuf *b, size_t cap) {
    if (b->len <= cap)
        return;
    memmove(b->data, b->data + b->len - cap, cap);
    b->len = cap;
    b->data[cap] = '\0';
}

/* Returns 1 at end of file. */
static int read_stream(sb_job *j, sb_stream *s) {
    char buf[65536];
    for (;;) {
        ssize_t n = read(s->fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return errno == EAGAIN ? 0 : 1;
        if (n == 0)
            return 1;
        if (j->opts->keep_tail) {
            if (pk_strbuf_append(&s->kept, buf, (size_t)n))
                kill_job(j, SB_KILL_OUTPUT);
            if (s->kept.len > 2 * j->cap) /* amortized: trim to the last cap bytes now and then */
                trim_to_tail(&s->kept, j->cap);
        } else if (s->kept.len < j->cap) {
            size_t keep = j->cap - s->kept.len < (size_t)n ? j->cap - s->kept.len : (size_t)n;
            if (pk_strbuf_append(&s->kept, buf, keep))
                kill_job(j, SB_KILL_OUTPUT);
        }
        s->total += (size_t)n;
        if (s->total > j->cap + SB_FLOOD_BYTES)
            kill_job(j, SB_KILL_OUTPUT);
        if ((size_t)n < sizeof buf)
            return 0;
    }
}

static void read_records(sb_job *j) {
    for (;;) {
        ssize_t n = read(j->status_fd, j->rec_buf + j->rec_len, sizeof j->rec_buf - j->rec_len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        j->rec_len += (size_t)n;
        if (j->rec_len == sizeof j->rec_buf) {
            if (!j->have_rec)
                memcpy(&j->rec, j->rec_buf, sizeof j->rec);
            j->have_rec = 1;
            j->rec_len = 0;
        }
    }
}

static void feed_stdin(sb_job *j) {
    const pk_sandbox_opts *o = j->opts;
    while (j->stdin_off < o->stdin_len) {
        ssize_t n = send(j->stdin_fd, o->stdin_data + j->stdin_off, o->stdin_len - j->stdin_off,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        if (n < 0)
            break; /* the command stopped reading: fine */
        j->stdin_off += (size_t)n;
    }
    close(j->stdin_fd);
    j->stdin_fd = -1;
}

static void supervise(sb_job *j, double start) {
    const pk_sandbox_opts *o = j->opts;
    const double wall_deadline = start + j->wall_ms;
    int out_open = 1, err_open = 1, st_open = 1, exited = 0;
    while (!exited) {
        double now = pk_now_ms();
        /* The caller's deadline is read afresh every time: it may move later again (a phase
         * budget that ended), never past the wall limit. */
        double deadline = wall_deadline;
        if (o->deadline_ms) {
            double d = pk_deadline_load(o->deadline_ms);
            if (d > 0 && d < deadline)
                deadline = d;
        }
        if (now >= deadline && j->killed == SB_KILL_NONE)
            kill_job(j, SB_KILL_WALL);
        int timeout = j->killed ? 50 : (int)(deadline - now) + 1;
        if (o->deadline_ms && timeout > 20)
            timeout = 20; /* the deadline may move while we wait */
        if (o->cpu_ms > 0 && j->cg.has_cpu && timeout > 20)
            timeout = 20; /* CPU time summed over the tree is polled */
        if (j->pidfd < 0 && timeout > 5)
            timeout = 5;
        struct pollfd p[5] = {{out_open ? j->out.fd : -1, POLLIN, 0},
                              {err_open ? j->err.fd : -1, POLLIN, 0},
                              {st_open ? j->status_fd : -1, POLLIN, 0},
                              {j->pidfd, POLLIN, 0},
                              {j->stdin_fd, POLLOUT, 0}};
        if (poll(p, 5, timeout) < 0 && errno != EINTR && errno != EAGAIN) {
            kill_job(j, SB_KILL_NONE); /* cannot supervise: end the job rather than leave it */
            p[3].revents = POLLIN;
        }
        if (p[0].revents && read_stream(j, &j->out))
            out_open = 0;
        if (p[1].revents && read_stream(j, &j->err))
            err_open = 0;
        if (p[2].revents) {
            read_records(j);
            if (p[2].revents & (POLLHUP | POLLERR) && !(p[2].revents & POLLIN))
                st_open = 0;
        }
        if (p[4].revents)
            feed_stdin(j);
        if (o->cpu_ms > 0 && j->cg.has_cpu && j->killed == SB_KILL_NONE &&
            sb_cgroup_cpu_ms(&j->cg) >= o->cpu_ms)
            kill_job(j, SB_KILL_CPU);
        if (j->pidfd < 0 || p[3].revents) {
            int r = wait4(j->pid, &j->wstatus, WNOHANG | __WALL, &j->ru);
            if (r == j->pid || (r < 0 && errno != EINTR))
                exited = 1;
        }
    }
    /* Init has been reaped, so every process of the namespace is gone: drain what is left. */
    if (out_open)
        read_stream(j, &j->out);
    if (err_open)
        read_stream(j, &j->err);
    read_records(j);
}

static void verdict(sb_job *j, pk_sandbox_result *res) {
    long ooms = sb_cgroup_oom_kills(&j->cg);
    const pk_sandbox_opts *o = j->opts;
    if (j->have_rec && j->rec.kind == SB_REC_SETUP_ERROR) {
        res->status = PK_SB_SETUP_ERROR;
        bounded(res->detail, sizeof res->detail, "%s: %s", j->rec.msg, strerror(j->rec.wstatus));
        return;
    }
    if (j->have_rec) {
        int st = j->rec.wstatus;
        if (WIFEXITED(st)) {
            res->exit_code = WEXITSTATUS(st);
            res->status = res->exit_code ? PK_SB_EXIT : PK_SB_OK;
        } else if (WIFSIGNALED(st)) {
            res->signal = WTERMSIG(st);
            res->status = PK_SB_SIGNAL;
        }
    }
    if (j->killed == SB_KILL_WALL || j->killed == SB_KILL_CPU) {
        res->status = PK_SB_TIMEOUT;
        bounded(res->detail, sizeof res->detail, "%s limit reached",
                j->killed == SB_KILL_WALL ? "wall-time" : "CPU-time");
    } else if (j->killed == SB_KILL_OUTPUT) {
        res->status = PK_SB_OUTPUT_LIMIT;
        bounded(res->detail, sizeof res->detail, "output kept flooding past the cap");
    } else if (!j->have_rec) {
        if (ooms > 0) {
            res->status = PK_SB_MEMORY;
        } else {
            res->status = PK_SB_SETUP_ERROR;
            bounded(res->detail, sizeof res->detail,
                    "sandbox init ended without a verdict (wait status 0x%x)", j->wstatus);
        }
    } else if (res->status == PK_SB_SIGNAL && res->signal == SIGXCPU) {
        res->status = PK_SB_TIMEOUT;
        bounded(res->detail, sizeof res->detail, "CPU-time limit reached");
    } else if (res->status == PK_SB_SIGNAL && res->signal == SIGXFSZ) {
        res->status = PK_SB_OUTPUT_LIMIT;
        bounded(res->detail, sizeof res->detail, "file-size limit reached");
    } else if (res->status != PK_SB_OK && ooms > 0) {
        res->status = PK_SB_MEMORY;
        bounded(res->detail, sizeof res->detail, "memory limit reached (%ld OOM kills)", ooms);
    } else if (res->status == PK_SB_SIGNAL && res->signal == SIGKILL && o->cpu_ms > 0 &&
               res->cpu_ms >= o->cpu_ms) {
        res->status = PK_SB_TIMEOUT;
        bounded(res->detail, sizeof res->detail, "CPU-time limit reached");
    }
}

static void job_free(sb_job *j) {
    if (j->have_plan)
        sb_plan_free(&j->plan);
    sb_env_free(j->env);
    sb_cgroup_destroy(&j->cg);
    if (j->own_workdir)
        pk_rm_rf(j->workdir);
    free(j->workdir);
    pk_strbuf_free(&j->out.kept);
    pk_strbuf_free(&j->err.kept);
    int fds[] = {j->out.fd, j->err.fd, j->status_fd, j->stdin_fd, j->pidfd};
    for (size_t i = 0; i < sizeof fds / sizeof *fds; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

static int make_pipes(int sync[2], int status[2], int out[2], int errp[2], int in[2],
                      const pk_sandbox_opts *o) {
    int rc = pipe2(sync, O_CLOEXEC) | pipe2(status, O_CLOEXEC) | pipe2(out, O_CLOEXEC) |
             pipe2(errp, O_CLOEXEC);
    if (o->stdin_data) {
        /* A socket, so that writing after the command quits gives EPIPE without SIGPIPE. */
        rc |= socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in);
    } else {
        in[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
        in[1] = -1;
        rc |= in[0] < 0 ? -1 : 0;
    }
    return rc;
}

static void close_all(int *fds, int n) {
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0)
            close(fds[i]);
}

/* Runs the prepared job; leaves the verdict's raw material in j. */
static void launch(sb_job *j, char *const argv[], const struct sock_fprog *prog, int use_as,
                   pk_sandbox_result *res) {
    int fds[10];
    for (int i = 0; i < 10; i++)
        fds[i] = -1;
    int *sync = fds, *status = fds + 2, *out = fds + 4, *errp = fds + 6, *in = fds + 8;
    if (make_pipes(sync, status, out, errp, in, j->opts)) {
        set_setup_error(res, "pipes: %s", strerror(errno));
        close_all(fds, 10);
        return;
    }
    sb_child_args a;
    fill_child_args(j, &a, prog, argv, use_as);
    a.sync_fd = sync[0];
    a.status_fd = status[1];
    a.stdin_fd = in[0];
    a.stdout_fd = out[1];
    a.stderr_fd = errp[1];
    double start = pk_now_ms();
    long pid = syscall(SYS_clone,
                       (unsigned long)(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET |
                                       CLONE_NEWIPC | CLONE_NEWUTS | SIGCHLD),
                       0, 0, 0, 0);
    if (pid == 0)
        sb_child_main(&a);
    int child_ends[] = {sync[0], status[1], in[0], out[1], errp[1]};
    close_all(child_ends, 5);
    j->out.fd = out[0];
    j->err.fd = errp[0];
    j->status_fd = status[0];
    j->stdin_fd = in[1];
    if (pid < 0) {
        set_setup_error(res, "clone with new namespaces: %s", strerror(errno));
        close(sync[1]);
        return;
    }
    j->pid = (int)pid;
    if (j->cg.version && sb_cgroup_attach(&j->cg, j->pid))
        bounded(j->cg.note, sizeof j->cg.note, "cgroup attach failed: %s", strerror(errno));
    if (map_ids(j->pid)) {
        set_setup_error(res, "user namespace id map: %s", strerror(errno));
        close(sync[1]);
        kill(j->pid, SIGKILL);
        waitpid(j->pid, NULL, __WALL);
        return;
    }
    j->pidfd = (int)syscall(SYS_pidfd_open, j->pid, 0);
    ssize_t w = write(sync[1], "g", 1);
    close(sync[1]);
    if (w != 1)
        kill_job(j, SB_KILL_NONE);
    /* Our ends never block: a reader that blocked would stop the wall clock's enforcement. */
    int ours[] = {j->out.fd, j->err.fd, j->status_fd, j->stdin_fd};
    for (int i = 0; i < 4; i++)
        if (ours[i] >= 0)
            fcntl(ours[i], F_SETFL, fcntl(ours[i], F_GETFL) | O_NONBLOCK);
    supervise(j, start);
    res->wall_ms = pk_now_ms() - start;
    double cg_cpu = sb_cgroup_cpu_ms(&j->cg);
    res->cpu_ms = cg_cpu >= 0 ? cg_cpu
                              : j->ru.ru_utime.tv_sec * 1e3 + j->ru.ru_utime.tv_usec / 1e3 +
                                    j->ru.ru_stime.tv_sec * 1e3 + j->ru.ru_stime.tv_usec / 1e3;
    res->max_rss_kb = j->ru.ru_maxrss;
    verdict(j, res);
}

int pk_sandbox_run(const pk_sandbox_opts *opts, char *const argv[], pk_sandbox_result *res,
                   pk_error *err) {
    if (!opts || !argv || !argv[0] || !res)
        return pk_error_set(err, PK_ERR_INVALID, "pk_sandbox_run: opts, argv[0] and res needed");
    if (opts->n_gpus < 0 || opts->n_ro < 0 || opts->n_rw < 0 || (opts->n_gpus && !opts->gpus) ||
        (opts->n_ro && !opts->ro) || (opts->n_rw && !opts->rw) || opts->n_hide < 0 ||
        (opts->n_hide && !opts->hide))
        return pk_error_set(err, PK_ERR_INVALID, "pk_sandbox_run: bad list arguments");
    memset(res, 0, sizeof *res);
    sb_job j;
    memset(&j, 0, sizeof j);
    j.opts = opts;
    j.wall_ms = opts->wall_ms > 0 ? opts->wall_ms : PK_SANDBOX_DEFAULT_WALL_MS;
    j.pids = opts->pids > 0 ? opts->pids : 256;
    j.fsize_mb = opts->fsize_mb > 0 ? opts->fsize_mb : 256;
    j.nofile = opts->nofile > 0 ? opts->nofile : 1024;
    j.cap = opts->output_cap > 0 ? opts->output_cap : PK_SANDBOX_DEFAULT_OUTPUT_CAP;
    j.out.fd = j.err.fd = j.status_fd = j.stdin_fd = j.pidfd = -1;
    pk_error perr = {0};
    const struct sock_fprog *prog = sb_seccomp_program(&perr);
    if (!prog) {
        set_setup_error(res, "%s", perr.message);
    } else if (prepare_workdir(&j, res) == 0) {
        if (sb_plan_build(&j.plan, opts, j.workdir, &perr)) {
            set_setup_error(res, "filesystem: %s", perr.message);
        } else {
            j.have_plan = 1;
            j.env = sb_env_build(opts, j.workdir, j.plan.cuda_visible);
            if (!j.env) {
                set_setup_error(res, "out of memory");
            } else {
                sb_cgroup_create(&j.cg, opts->mem_mb, j.pids);
                int use_as = opts->mem_mb > 0 && !j.cg.has_mem && opts->n_gpus == 0;
                describe_limits(&j, res, use_as);
                launch(&j, argv, prog, use_as, res);
                describe_limits(&j, res, use_as);
            }
        }
    }
    trim_to_tail(&j.out.kept, j.cap);
    trim_to_tail(&j.err.kept, j.cap);
    res->truncated = j.out.total > j.out.kept.len || j.err.total > j.err.kept.len;
    res->out_len = j.out.kept.len;
    res->err_len = j.err.kept.len;
    res->out = pk_strbuf_take(&j.out.kept);
    res->err = pk_strbuf_take(&j.err.kept);
    job_free(&j);
    if (!res->out || !res->err) {
        pk_sandbox_result_free(res);
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    }
    return PK_OK;
}
