/* Running one hook process: request on stdin, answer on stdout, killed at the deadline.
 *
 * The server may be multi-threaded, so the child does only async-signal-safe work between fork
 * and exec. It gets its own process group (a hung command's children die with it), no core
 * dumps, a CPU limit, stderr on /dev/null and no inherited descriptors (close_range). SIGPIPE,
 * raised when a hook exits without reading its request, is blocked in the calling thread and
 * consumed, so it can never kill the server. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "summarizer_internal.h"

static void pk_hook_child(char *const argv[], int in_fd, int out_fd, int null_fd, int cpu_s) {
    setpgid(0, 0);
    if (dup2(in_fd, STDIN_FILENO) < 0 || dup2(out_fd, STDOUT_FILENO) < 0 ||
        dup2(null_fd, STDERR_FILENO) < 0) {
        _exit(126);
    }
    close_range(3, ~0U, 0);
    struct rlimit core = {0, 0};
    setrlimit(RLIMIT_CORE, &core);
    struct rlimit cpu = {(rlim_t)cpu_s, (rlim_t)cpu_s + 1};
    setrlimit(RLIMIT_CPU, &cpu);
    /* The server ignores SIGPIPE; a hook starts with the defaults. */
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    sigaction(SIGPIPE, &dfl, NULL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execv(argv[0], argv);
    _exit(127);
}

static void pk_kill_and_reap(pid_t pid) {
    kill(-pid, SIGKILL);
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
}

typedef struct pk_hook_io {
    int in_fd, out_fd;
    const char *input;
    size_t input_len, written;
    pk_strbuf out;
} pk_hook_io;

/* Feeds stdin and drains stdout until EOF on stdout. Returns PK_OK, PK_ERR_TIMEOUT, or an error
 * for too much output. */
static int pk_hook_pump(pk_hook_io *io, double deadline, size_t max_out, pk_error *err) {
    for (;;) {
        double left = deadline - pk_now_ms();
        if (left <= 0) {
            return pk_error_set(err, PK_ERR_TIMEOUT, "no answer within the time limit");
        }
        struct pollfd fds[2] = {{io->out_fd, POLLIN, 0}, {io->in_fd, POLLOUT, 0}};
        int nfds = io->in_fd >= 0 ? 2 : 1;
        int n = poll(fds, (nfds_t)nfds, (int)left + 1);
        if (n < 0 && errno != EINTR) {
            return pk_error_errno(err, PK_ERR_SYSTEM, "poll");
        }
        if (n <= 0) {
            continue;
        }
        if (nfds == 2 && fds[1].revents) {
            ssize_t w = write(io->in_fd, io->input + io->written, io->input_len - io->written);
            if (w > 0) {
                io->written += (size_t)w;
            }
            if ((w < 0 && errno != EAGAIN && errno != EINTR) || io->written == io->input_len) {
                close(io->in_fd); /* done, or the hook stopped reading: not our failure */
                io->in_fd = -1;
            }
        }
        if (fds[0].revents) {
            char buf[8192];
            ssize_t r = read(io->out_fd, buf, sizeof(buf));
            if (r == 0) {
                return PK_OK;
            }
            if (r < 0 && errno != EAGAIN && errno != EINTR) {
                return pk_error_errno(err, PK_ERR_IO, "read from the hook");
            }
            if (r > 0 && pk_strbuf_append(&io->out, buf, (size_t)r) != PK_OK) {
                return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
            }
            if (io->out.len > max_out) {
                return pk_error_set(err, PK_ERR_INVALID, "printed more than %zu bytes", max_out);
            }
        }
    }
}

/* Waits for the exit until the deadline. */
static int pk_hook_wait(pid_t pid, double deadline, int *exit_code, pk_error *err) {
    for (;;) {
        int st = 0;
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid) {
            if (WIFSIGNALED(st)) {
                const char *name = sigabbrev_np(WTERMSIG(st));
                return pk_error_set(err, PK_ERR_SYSTEM, "crashed (signal %d, SIG%s)", WTERMSIG(st),
                                    name ? name : "?");
            }
            *exit_code = WEXITSTATUS(st);
            return PK_OK;
        }
        if (r < 0 && errno != EINTR) {
            return pk_error_errno(err, PK_ERR_SYSTEM, "waitpid");
        }
        if (pk_now_ms() >= deadline) {
            pk_kill_and_reap(pid);
            return pk_error_set(err, PK_ERR_TIMEOUT, "did not exit within the time limit");
        }
        struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

static int pk_hook_spawn(char *const argv[], int timeout_ms, pid_t *pid, int *in_fd, int *out_fd,
                         pk_error *err) {
    int in_pipe[2], out_pipe[2];
    if (pipe2(in_pipe, O_CLOEXEC) != 0) {
        return pk_error_errno(err, PK_ERR_SYSTEM, "pipe");
    }
    if (pipe2(out_pipe, O_CLOEXEC) != 0) {
        close(in_pipe[0]);
        close(in_pipe[1]);
        return pk_error_errno(err, PK_ERR_SYSTEM, "pipe");
    }
    int null_fd = open("/dev/null", O_WRONLY | O_CLOEXEC);
    *pid = null_fd < 0 ? -1 : fork();
    if (*pid == 0) {
        pk_hook_child(argv, in_pipe[0], out_pipe[1], null_fd, timeout_ms / 1000 + 1);
    }
    int fork_errno = errno;
    close(in_pipe[0]);
    close(out_pipe[1]);
    if (null_fd >= 0) {
        close(null_fd);
    }
    if (*pid < 0) {
        close(in_pipe[1]);
        close(out_pipe[0]);
        errno = fork_errno;
        return pk_error_errno(err, PK_ERR_SYSTEM, "fork for %s", argv[0]);
    }
    setpgid(*pid, *pid); /* also here: the child may not have run yet when we kill the group */
    fcntl(in_pipe[1], F_SETFL, O_NONBLOCK);
    *in_fd = in_pipe[1];
    *out_fd = out_pipe[0];
    return PK_OK;
}

int pk_hook_exec(char *const argv[], const char *input, size_t input_len, int timeout_ms,
                 size_t max_out, char **out, int *exit_code, pk_error *err) {
    *out = NULL;
    *exit_code = -1;
    sigset_t pipe_set, old_set;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old_set);
    double deadline = pk_now_ms() + timeout_ms;
    pk_hook_io io = {.in_fd = -1, .out_fd = -1, .input = input, .input_len = input_len};
    pid_t pid = -1;
    int rc = pk_hook_spawn(argv, timeout_ms, &pid, &io.in_fd, &io.out_fd, err);
    if (rc == PK_OK) {
        if (input_len == 0) {
            close(io.in_fd);
            io.in_fd = -1;
        }
        rc = pk_hook_pump(&io, deadline, max_out, err);
        if (io.in_fd >= 0) {
            close(io.in_fd);
        }
        close(io.out_fd);
        if (rc == PK_OK) {
            rc = pk_hook_wait(pid, deadline, exit_code, err);
        } else {
            pk_kill_and_reap(pid);
        }
    }
    sigset_t pending;
    sigpending(&pending);
    if (sigismember(&pending, SIGPIPE) && !sigismember(&old_set, SIGPIPE)) {
        struct timespec zero = {0, 0};
        sigtimedwait(&pipe_set, NULL, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &old_set, NULL);
    if (rc == PK_OK) {
        *out = pk_strbuf_take(&io.out);
    }
    pk_strbuf_free(&io.out);
    return rc;
}
