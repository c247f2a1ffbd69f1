/* Internal pieces of pk_sandbox. Everything the child runs is prepared by the parent first:
 * between clone() and execve() the child of a multi-threaded process may only make system calls
 * (no malloc, no stdio), so the mount plan, the seccomp program and the environment are built
 * here, before the clone. */
#ifndef PK_SB_INTERNAL_H
#define PK_SB_INTERNAL_H

#include <linux/filter.h>
#include <stddef.h>
#include <sys/resource.h>

#include "pk_sandbox.h"

/* One step of building the job's root filesystem. Paths are absolute host paths of the
 * per-job root (dst) and of the host (src); the child executes them in order. */
typedef enum sb_op_kind {
    SB_OP_MKDIR,      /* mkdir -p dst */
    SB_OP_BIND_RO,    /* bind src on dst (created like src), read-only, nosuid, recursive */
    SB_OP_BIND_RW,    /* bind src on dst, nosuid, nodev, recursive */
    SB_OP_BIND_DEV,   /* bind a device node src on dst (created as a file) */
    SB_OP_SYMLINK,    /* symlink data at dst */
    SB_OP_TMPFS,      /* tmpfs at dst with options data */
    SB_OP_PROC,       /* a fresh procfs at dst (the new PID namespace's) */
    SB_OP_PROTECT,    /* bind dst on itself read-only, when it exists (/proc/sys, ...) */
    SB_OP_WRITE_FILE, /* dst created with contents data */
    SB_OP_HIDE,       /* an empty read-only tmpfs on the existing directory dst */
} sb_op_kind;

typedef struct sb_op {
    sb_op_kind kind;
    const char *src;
    const char *dst;
    const char *data;
    int src_is_dir;
} sb_op;

typedef struct sb_plan {
    char *root; /* host path of the per-job root directory (a tmpfs is mounted on it) */
    sb_op *ops;
    int n_ops, cap_ops;
    char **owned; /* strings the ops point into */
    int n_owned, cap_owned;
    char **binds; /* real host paths already visible inside (to skip nested binds) */
    int n_binds, cap_binds;
    char *cuda_visible; /* with GPUs: CUDA_VISIBLE_DEVICES naming them inside; else NULL */
} sb_plan;

/* Builds the plan for opts (workdir already decided). Returns PK_OK or an error. */
int sb_plan_build(sb_plan *plan, const pk_sandbox_opts *opts, const char *workdir, pk_error *err);
void sb_plan_free(sb_plan *plan);

/* The seccomp program, built once per process by libseccomp. Returns NULL and sets err when
 * it cannot be built. The program is immutable and shared. */
const struct sock_fprog *sb_seccomp_program(pk_error *err);

/* cgroups for one job: memory, pids, cpu accounting, v1 or v2, where the host allows. */
typedef struct sb_cgroup {
    int version;    /* 0: none, 1, 2 */
    char mem[512];  /* job directory in the memory hierarchy (v2: the only one) */
    char pids[512]; /* v1 pids hierarchy */
    char cpu[512];  /* v1 cpuacct hierarchy */
    int has_mem, has_pids, has_cpu;
    char note[200]; /* why something is missing */
} sb_cgroup;

void sb_cgroup_create(sb_cgroup *cg, long mem_mb, int pids);
int sb_cgroup_attach(sb_cgroup *cg, int pid);  /* 0 on success; clears what failed */
long sb_cgroup_oom_kills(const sb_cgroup *cg); /* -1 unknown */
double sb_cgroup_cpu_ms(const sb_cgroup *cg);  /* -1 unknown */
void sb_cgroup_destroy(sb_cgroup *cg);

/* The child's environment: opts->env or the default, with NCCL_NVLS_ENABLE=0 enforced;
 * cuda_visible (the plan's) names the job's GPUs in the default. */
char **sb_env_build(const pk_sandbox_opts *opts, const char *workdir, const char *cuda_visible);
void sb_env_free(char **env);

/* Everything the sandbox's init and the command need after the clone. */
typedef struct sb_child_args {
    const sb_plan *plan;
    const char *workdir;
    const struct sock_fprog *seccomp;
    char *const *argv;
    char *const *envp;
    int sync_fd;   /* read end: the parent writes one byte once cgroups and id maps are set */
    int status_fd; /* write end: sb_record messages to the parent */
    int stdin_fd, stdout_fd, stderr_fd;
    struct rlimit cpu, fsize, nofile, nproc, as;
    int set_as;
    int nice; /* added to the command's nice value (> 0 only) */
} sb_child_args;

/* What the sandbox's init sends the parent: the command's wait status, or a setup error. */
typedef struct sb_record {
    int kind; /* SB_REC_STATUS or SB_REC_SETUP_ERROR */
    int wstatus;
    char msg[200];
} sb_record;
enum { SB_REC_STATUS = 1, SB_REC_SETUP_ERROR = 2 };

/* The body of the cloned child (PID 1 of the new namespaces). Never returns. */
void sb_child_main(const sb_child_args *a) __attribute__((noreturn));

/* JSON string escaping that always yields valid UTF-8 (invalid bytes become U+FFFD). */
int sb_json_escape(pk_strbuf *sb, const char *s, size_t n);

#endif
