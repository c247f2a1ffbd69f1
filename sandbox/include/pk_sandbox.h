/* pk_sandbox: runs untrusted commands (nvcc, candidate runners) in a crash-isolated sandbox.
 * One library, used by `pkgym sandbox`, the harness and the server. See docs/sandbox.md. */
#ifndef PK_SANDBOX_H
#define PK_SANDBOX_H

#include <stddef.h>

#include "pk_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What pk_sandbox_opts fields left 0 mean (also for the harness's unsandboxed debug runs). */
#define PK_SANDBOX_DEFAULT_WALL_MS 60000
#define PK_SANDBOX_DEFAULT_OUTPUT_CAP (1024 * 1024)

typedef enum pk_sb_status {
    PK_SB_OK = 0,       /* exited 0 */
    PK_SB_EXIT,         /* exited non-zero */
    PK_SB_SIGNAL,       /* killed by a signal of its own making (segfault, abort, ...) */
    PK_SB_TIMEOUT,      /* wall or CPU limit */
    PK_SB_MEMORY,       /* memory limit */
    PK_SB_OUTPUT_LIMIT, /* stdout/stderr or file-size cap exceeded */
    PK_SB_SETUP_ERROR,  /* the sandbox could not be built; the command never ran */
} pk_sb_status;

const char *pk_sb_status_name(pk_sb_status s); /* "ok", "exit", "signal", ... */

typedef struct pk_sandbox_opts {
    int wall_ms;       /* enforced from outside; 0: PK_SANDBOX_DEFAULT_WALL_MS */
    int cpu_ms;        /* RLIMIT_CPU, summed over the tree by cgroup where possible; 0: none */
    long mem_mb;       /* memory cgroup limit where the host allows it; 0: none */
    int pids;          /* pids cgroup / RLIMIT_NPROC; 0: 256 */
    long fsize_mb;     /* RLIMIT_FSIZE; 0: 256 */
    int nofile;        /* RLIMIT_NOFILE; 0: 1024 */
    size_t output_cap; /* bytes kept of stdout and of stderr; 0: PK_SANDBOX_DEFAULT_OUTPUT_CAP */
    const int *gpus;   /* GPU indices (PCI bus order) whose nodes are bound, found through the
                          driver (pk_gpu_nodes.h), plus the control nodes */
    int n_gpus;
    const char *const *ro; /* extra read-only binds (same path inside) */
    int n_ro;
    const char *const *rw; /* extra read-write binds (same path inside) */
    int n_rw;
    const char *const *hide; /* directories inside the binds shown as empty and read-only (a
                                problem's solutions/); missing ones are skipped */
    int n_hide;
    const char *workdir;    /* private writable work dir (same path inside), also the cwd; NULL: a
                               fresh temp dir */
    const char *const *env; /* NULL-terminated environment; NULL: a minimal default */
    const char *stdin_data; /* bytes fed to stdin; NULL: /dev/null */
    size_t stdin_len;
    const char *const *env_add; /* NULL-terminated "NAME=VALUE"s added to env or the default
                                   (NCCL_NVLS_ENABLE stays 0 whatever they say) */
    int keep_tail; /* keep the last output_cap bytes of each stream instead of the first */
    /* Optional, read while the command runs: when it holds a value > 0 (pk_now_ms() clock),
     * the command is killed as by the wall limit at that time if that comes first. Lets a
     * caller start a command early and bound it from a later moment (warm runners), or bound
     * one phase of it (the harness's run watcher). Read afresh every ~20 ms, so it may move
     * earlier or later (never past wall_ms); 0 again means none. Read with pk_deadline_load;
     * writers use pk_deadline_store (another thread may be reading). */
    const double *deadline_ms;
    int nice; /* > 0: the command runs this much nicer than the caller (lower CPU priority) */
} pk_sandbox_opts;

typedef struct pk_sandbox_result {
    pk_sb_status status;
    int exit_code;
    int signal;
    double wall_ms;
    double cpu_ms;
    long max_rss_kb;
    char *out; /* owned, NUL-terminated, at most output_cap bytes (the first, or the last) */
    size_t out_len;
    char *err;
    size_t err_len;
    int truncated;
    char detail[256]; /* what failed (setup_error) or which limit ended the job; else empty */
    /* How each limit was enforced on this host, e.g. "memory=cgroup-v1 pids=cgroup-v1+rlimit";
     * a limit that could not be applied says so here (never silently dropped). */
    char limits[256];
} pk_sandbox_result;

/* Read-only paths every sandbox sees (besides opts->ro): the toolchain and shared libraries.
 * The environment variable PKGYM_SANDBOX_RO (colon-separated paths) adds to them. */
extern const char *const pk_sandbox_default_ro[];

/* Runs argv[0] (a path) with argv inside a new sandbox and waits for it. Returns PK_OK when a
 * verdict was produced (any status, setup_error included); otherwise PK_ERR_INVALID on bad
 * arguments, or PK_ERR_NOMEM when the captured output could not be kept (res is then freed). */
int pk_sandbox_run(const pk_sandbox_opts *opts, char *const argv[], pk_sandbox_result *res,
                   pk_error *err);
void pk_sandbox_result_free(pk_sandbox_result *res);
/* The verdict as one JSON object (malloc'd), as printed by `pkgym sandbox`. */
char *pk_sandbox_result_to_json(const pk_sandbox_result *res);

/* `pkgym sandbox` entry point. */
int pk_cmd_sandbox(int argc, char **argv);

#ifdef __cplusplus
}
#endif
#endif
