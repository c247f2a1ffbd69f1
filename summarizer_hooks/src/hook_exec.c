/* Running one hook process inside pk_sandbox: request on stdin, answer on stdout.
 *
 * Hooks read model-written text, so a bug in a plugin or command must not become a way out:
 * each call is a fresh sandbox (new namespaces, no network, the root file system read-only with
 * a private work dir and tmp, seccomp, no capabilities) with a wall and CPU limit of the hook's
 * timeout, a memory, process, file-size and descriptor limit. The sandbox is thread-safe and
 * writes stdin without SIGPIPE, so a multi-threaded server may call this from any thread. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_sandbox.h"
#include "summarizer_internal.h"

#define PK_HOOK_MEM_MB 512
#define PK_HOOK_PIDS 32
#define PK_HOOK_FSIZE_MB 16
#define PK_HOOK_NOFILE 256

/* The last non-empty line of the hook's stderr, for the operator's log ("" if none). */
static void stderr_tail(const pk_sandbox_result *r, char *out, size_t cap) {
    out[0] = '\0';
    if (!r->err || r->err_len == 0)
        return;
    size_t end = r->err_len;
    while (end > 0 && (r->err[end - 1] == '\n' || r->err[end - 1] == ' '))
        end--;
    size_t start = end;
    while (start > 0 && r->err[start - 1] != '\n')
        start--;
    size_t n = end - start < 200 ? end - start : 200;
    snprintf(out, cap, " (stderr: %.*s)", (int)n, r->err + start);
    for (char *c = out; *c; c++)
        *c = (unsigned char)*c < 0x20 ? ' ' : *c;
}

static int verdict_error(const pk_sandbox_result *r, int timeout_ms, size_t max_out,
                         pk_error *err) {
    char tail[240];
    stderr_tail(r, tail, sizeof tail);
    switch (r->status) {
    case PK_SB_SIGNAL: {
        const char *name = sigabbrev_np(r->signal);
        return pk_error_set(err, PK_ERR_SYSTEM, "crashed (signal %d, SIG%s)%s", r->signal,
                            name ? name : "?", tail);
    }
    case PK_SB_TIMEOUT:
        return pk_error_set(err, PK_ERR_TIMEOUT, "no answer within the time limit (%d ms)",
                            timeout_ms);
    case PK_SB_MEMORY:
        return pk_error_set(err, PK_ERR_SYSTEM, "went over its memory limit (%d MiB)",
                            PK_HOOK_MEM_MB);
    case PK_SB_OUTPUT_LIMIT:
        return pk_error_set(err, PK_ERR_INVALID, "printed more than %zu bytes (%s)", max_out,
                            r->detail);
    case PK_SB_SETUP_ERROR:
        return pk_error_set(err, PK_ERR_SYSTEM, "could not be started in the sandbox: %s",
                            r->detail);
    default:
        return pk_error_set(err, PK_ERR_INTERNAL, "sandbox status %s",
                            pk_sb_status_name(r->status));
    }
}

int pk_hook_exec(char *const argv[], const char *const ro[], const char *input, size_t input_len,
                 int timeout_ms, size_t max_out, char **out, int *exit_code, pk_error *err) {
    *out = NULL;
    *exit_code = -1;
    int n_ro = 0;
    while (ro && ro[n_ro])
        n_ro++;
    pk_sandbox_opts so;
    memset(&so, 0, sizeof so);
    so.wall_ms = timeout_ms;
    so.cpu_ms = timeout_ms;
    so.mem_mb = PK_HOOK_MEM_MB;
    so.pids = PK_HOOK_PIDS;
    so.fsize_mb = PK_HOOK_FSIZE_MB;
    so.nofile = PK_HOOK_NOFILE;
    so.output_cap = max_out;
    so.ro = ro;
    so.n_ro = n_ro;
    so.stdin_data = input;
    so.stdin_len = input_len;
    pk_sandbox_result r;
    memset(&r, 0, sizeof r);
    int rc = pk_sandbox_run(&so, argv, &r, err);
    if (rc != PK_OK)
        return rc;
    if (r.status == PK_SB_OK || r.status == PK_SB_EXIT) {
        if (r.truncated) {
            rc = pk_error_set(err, PK_ERR_INVALID, "printed more than %zu bytes", max_out);
        } else {
            *exit_code = r.exit_code;
            *out = r.out ? r.out : strdup("");
            r.out = NULL;
            rc = *out ? PK_OK : pk_error_set(err, PK_ERR_NOMEM, "out of memory");
        }
    } else {
        rc = verdict_error(&r, timeout_ms, max_out, err);
    }
    pk_sandbox_result_free(&r);
    return rc;
}
