/* The embedded server: `pkgym serve` as a child process (rollout cannot link env), bound to
 * an ipc:// endpoint in a fresh temporary directory (removed at the end). Its trajectory store
 * and caches (--data-dir, default OUT/data) and its output (OUT/serve.log) are kept: the store
 * is what `pkgym reward` and `pkgym export` read afterwards. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pk_eval_internal.h"

int pk_eval_server_start(const pk_eval_args *a, pk_eval_server *s, pk_error *err) {
    memset(s, 0, sizeof *s);
    s->pid = -1;
    const char *tmp = getenv("TMPDIR");
    snprintf(s->dir, sizeof s->dir, "%s/pkgym-eval-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(s->dir))
        return pk_error_errno(err, PK_ERR_IO, "mkdtemp %s", s->dir);
    snprintf(s->endpoint, sizeof s->endpoint, "ipc://%s/pkgym.sock", s->dir);
    int rc = pk_mkdir_p(a->out_dir, err);
    if (rc)
        return rc;
    if (a->data_dir)
        snprintf(s->data_dir, sizeof s->data_dir, "%s", a->data_dir);
    else
        snprintf(s->data_dir, sizeof s->data_dir, "%s/data", a->out_dir);
    /* A later --serve-arg --data-dir wins in `pkgym serve`: report that one. */
    for (int i = 0; i + 1 < a->n_serve_args; i++)
        if (strcmp(a->serve_args[i], "--data-dir") == 0)
            snprintf(s->data_dir, sizeof s->data_dir, "%s", a->serve_args[i + 1]);
    snprintf(s->log, sizeof s->log, "%s/serve.log", a->out_dir);
    const char *data = s->data_dir, *log = s->log;

    const char *argv[8 + PK_EVAL_MAX_SERVE_ARGS];
    int n = 0;
    argv[n++] = "pkgym";
    argv[n++] = "serve";
    argv[n++] = "--bind";
    argv[n++] = s->endpoint;
    argv[n++] = "--data-dir";
    argv[n++] = data;
    for (int i = 0; i < a->n_serve_args; i++)
        argv[n++] = a->serve_args[i];
    argv[n] = NULL;

    int logfd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (logfd < 0)
        return pk_error_errno(err, PK_ERR_IO, "open %s", log);
    pid_t pid = fork();
    if (pid < 0) {
        close(logfd);
        return pk_error_errno(err, PK_ERR_SYSTEM, "fork");
    }
    if (pid == 0) {
        dup2(logfd, STDOUT_FILENO);
        dup2(logfd, STDERR_FILENO);
        execv("/proc/self/exe", (char *const *)argv);
        dprintf(STDERR_FILENO, "exec /proc/self/exe serve: %s\n", strerror(errno));
        _exit(127);
    }
    close(logfd);
    s->pid = pid;
    return PK_OK;
}

/* The last lines of serve.log, for an error message. */
static void log_tail(const pk_eval_server *s, char *out, size_t cap) {
    char *text = NULL;
    size_t len = 0;
    out[0] = 0;
    if (pk_read_file(s->log, &text, &len, NULL) != PK_OK)
        return;
    size_t start = len > cap - 1 ? len - (cap - 1) : 0;
    snprintf(out, cap, "%s", text + start);
    free(text);
}

int pk_eval_server_check(pk_eval_server *s, pk_error *err) {
    if (s->pid <= 0)
        return PK_OK;
    int st;
    if (waitpid(s->pid, &st, WNOHANG) != s->pid)
        return PK_OK;
    s->pid = -1;
    char tail[400];
    log_tail(s, tail, sizeof tail);
    return pk_error_set(err, PK_ERR_IO, "the embedded `pkgym serve` exited (%s %d): %s",
                        WIFEXITED(st) ? "status" : "signal",
                        WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), tail);
}

void pk_eval_server_stop(pk_eval_server *s) {
    if (s->pid > 0) {
        kill(s->pid, SIGTERM);
        /* After a full eval nothing is in flight. On an early stop the server gets 15 s: its
         * shutdown grace (10 s by default), not a stage that runs on past it. */
        for (int i = 0; i < 300; i++) {
            if (waitpid(s->pid, NULL, WNOHANG) == s->pid) {
                s->pid = -1;
                break;
            }
            struct timespec ts = {0, 50 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        if (s->pid > 0) {
            kill(s->pid, SIGKILL);
            waitpid(s->pid, NULL, 0);
            s->pid = -1;
        }
    }
    if (s->dir[0])
        pk_rm_rf(s->dir);
    s->dir[0] = 0;
}
