/* Policies of `pkgym eval`: replay (pre-written responses on disk) and cmd (an external
 * process per turn: observation JSON on stdin, the action on stdout). */
#define _GNU_SOURCE /* pipe2 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pk_eval_internal.h"

#define PK_POLICY_MAX_OUTPUT (8u << 20)

struct pk_eval_policy {
    int is_cmd;
    char *arg; /* replay: the directory; cmd: the program */
    double timeout_s;
};

int pk_eval_policy_open(const char *spec, double timeout_s, pk_eval_policy **out, pk_error *err) {
    *out = NULL;
    int is_cmd = strncmp(spec, "cmd:", 4) == 0;
    if (!is_cmd && strncmp(spec, "replay:", 7) != 0)
        return pk_error_set(err, PK_ERR_INVALID, "policy '%s': want replay:DIR or cmd:PROGRAM",
                            spec);
    const char *arg = spec + (is_cmd ? 4 : 7);
    if (!*arg)
        return pk_error_set(err, PK_ERR_INVALID, "policy '%s' names nothing", spec);
    struct stat st;
    if (!is_cmd && (stat(arg, &st) != 0 || !S_ISDIR(st.st_mode)))
        return pk_error_set(err, PK_ERR_NOT_FOUND, "replay directory %s does not exist", arg);
    pk_eval_policy *p = calloc(1, sizeof *p);
    if (!p || !(p->arg = strdup(arg))) {
        free(p);
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    }
    p->is_cmd = is_cmd;
    p->timeout_s = timeout_s;
    *out = p;
    return PK_OK;
}

void pk_eval_policy_close(pk_eval_policy *p) {
    if (!p)
        return;
    free(p->arg);
    free(p);
}

int pk_eval_policy_covers(const pk_eval_policy *p, const char *problem) {
    if (p->is_cmd)
        return 1;
    char path[1024];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", p->arg, problem);
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int pk_eval_policy_is_cmd(const pk_eval_policy *p) {
    return p->is_cmd;
}

static int replay_act(pk_eval_policy *p, const pk_eval_obs *o, char **action, pk_error *err) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s/traj%d/turn%d.md", p->arg, o->problem, o->trajectory,
             o->turn);
    if (!pk_path_exists(path))
        snprintf(path, sizeof path, "%s/%s/turn%d.md", p->arg, o->problem, o->turn);
    if (!pk_path_exists(path))
        return PK_OK; /* no response for this turn: the trajectory ends */
    return pk_read_file(path, action, NULL, err);
}

static char *observation_json(const pk_eval_obs *o) {
    json_t *j =
        json_pack("{s:s, s:i, s:i, s:s, s:s?}", "problem", o->problem, "trajectory", o->trajectory,
                  "turn", o->turn, "prompt", o->prompt ? o->prompt : "", "feedback", o->feedback);
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    return text;
}

/* Feeds input to the child's stdin while collecting its stdout, until EOF or the deadline. */
static int exchange(int *in_fdp, int out_fd, const char *input, double deadline_ms, pk_strbuf *out,
                    pk_error *err) {
    size_t in_len = strlen(input), sent = 0;
    int in_fd = *in_fdp;
    fcntl(in_fd, F_SETFL, O_NONBLOCK);
    for (;;) {
        struct pollfd fds[2] = {{out_fd, POLLIN, 0}, {in_fd >= 0 ? in_fd : -1, POLLOUT, 0}};
        double left = deadline_ms - pk_now_ms();
        if (left <= 0)
            return pk_error_set(err, PK_ERR_TIMEOUT, "the policy command timed out");
        int n = poll(fds, 2, (int)(left < 1000 ? left + 1 : 1000));
        if (n < 0 && errno != EINTR)
            return pk_error_errno(err, PK_ERR_IO, "poll");
        if (in_fd >= 0 && (fds[1].revents & (POLLOUT | POLLERR | POLLHUP))) {
            ssize_t w = write(in_fd, input + sent, in_len - sent);
            if (w > 0)
                sent += (size_t)w;
            if (w < 0 && errno != EAGAIN && errno != EINTR)
                sent = in_len; /* the child closed its stdin: it need not read it all */
            if (sent == in_len) {
                close(in_fd);
                in_fd = *in_fdp = -1;
            }
        }
        if (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) {
            char buf[65536];
            ssize_t r = read(out_fd, buf, sizeof buf);
            if (r == 0)
                break;
            if (r > 0 && pk_strbuf_append(out, buf, (size_t)r))
                return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
            if (out->len > PK_POLICY_MAX_OUTPUT)
                return pk_error_set(err, PK_ERR_INVALID, "the policy printed more than %u bytes",
                                    PK_POLICY_MAX_OUTPUT);
        }
    }
    return PK_OK;
}

static int cmd_act(pk_eval_policy *p, const pk_eval_obs *o, char **action, pk_error *err) {
    char *input = observation_json(o);
    int to_child[2] = {-1, -1}, from_child[2] = {-1, -1};
    if (!input)
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    if (pipe2(to_child, O_CLOEXEC) || pipe2(from_child, O_CLOEXEC)) {
        free(input);
        return pk_error_errno(err, PK_ERR_SYSTEM, "pipe");
    }
    pid_t pid = fork();
    if (pid == 0) {
        dup2(to_child[0], STDIN_FILENO);
        dup2(from_child[1], STDOUT_FILENO);
        signal(SIGPIPE, SIG_DFL);
        execl("/bin/sh", "sh", "-c", p->arg, (char *)NULL);
        _exit(127);
    }
    close(to_child[0]);
    close(from_child[1]);
    pk_strbuf out = {0};
    int rc = pid < 0 ? pk_error_errno(err, PK_ERR_SYSTEM, "fork")
                     : exchange(&to_child[1], from_child[0], input,
                                pk_now_ms() + p->timeout_s * 1000.0, &out, err);
    if (to_child[1] >= 0)
        close(to_child[1]);
    close(from_child[0]);
    free(input);
    if (pid > 0) {
        if (rc)
            kill(pid, SIGKILL);
        int st = 0;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
            ;
        if (!rc && !(WIFEXITED(st) && WEXITSTATUS(st) == 0))
            rc = pk_error_set(err, PK_ERR_IO, "policy command '%s' failed (%s %d)", p->arg,
                              WIFEXITED(st) ? "exit status" : "signal",
                              WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    }
    if (rc) {
        pk_strbuf_free(&out);
        return rc;
    }
    *action = pk_strbuf_take(&out);
    return PK_OK;
}

int pk_eval_policy_act(pk_eval_policy *p, const pk_eval_obs *obs, char **action, pk_error *err) {
    *action = NULL;
    return p->is_cmd ? cmd_act(p, obs, action, err) : replay_act(p, obs, action, err);
}
