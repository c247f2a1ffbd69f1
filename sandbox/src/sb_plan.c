/* The mount plan: which host paths the job sees, and how. Built in the parent, where paths
 * can be resolved and memory allocated; executed by the child (sb_child.c). */
#define _GNU_SOURCE
#include "sb_internal.h"

#include "pk_gpu_nodes.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *const pk_sandbox_default_ro[] = {"/usr",
                                             "/lib",
                                             "/lib64",
                                             "/lib32",
                                             "/bin",
                                             "/sbin",
                                             "/usr/local/cuda",
                                             "/etc/ld.so.cache",
                                             "/etc/ld.so.conf",
                                             "/etc/ld.so.conf.d",
                                             "/etc/alternatives",
                                             "/etc/openmpi",
                                             NULL};

/* localhost must resolve for MPI and NCCL bootstrap; the host's /etc stays invisible (no passwd:
 * an `#include "/etc/passwd"` must find nothing). */
static const char sb_hosts[] = "127.0.0.1 localhost pkgym-sandbox\n::1 localhost\n";

static char *own(sb_plan *p, char *s) {
    if (!s)
        return NULL;
    if (p->n_owned == p->cap_owned) {
        int cap = p->cap_owned ? 2 * p->cap_owned : 32;
        char **n = realloc(p->owned, (size_t)cap * sizeof *n);
        if (!n) {
            free(s);
            return NULL;
        }
        p->owned = n;
        p->cap_owned = cap;
    }
    p->owned[p->n_owned++] = s;
    return s;
}

static char *in_root(sb_plan *p, const char *path) {
    return own(p, pk_path_join(p->root, path[0] == '/' ? path + 1 : path));
}

static int add_op(sb_plan *p, sb_op_kind kind, const char *src, const char *path, const char *data,
                  int src_is_dir, pk_error *err) {
    if (p->n_ops == p->cap_ops) {
        int cap = p->cap_ops ? 2 * p->cap_ops : 64;
        sb_op *n = realloc(p->ops, (size_t)cap * sizeof *n);
        if (!n)
            return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
        p->ops = n;
        p->cap_ops = cap;
    }
    char *dst = path == p->root ? own(p, strdup(path)) : in_root(p, path);
    char *s = src ? own(p, strdup(src)) : NULL;
    if (!dst || (src && !s))
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    p->ops[p->n_ops++] = (sb_op){kind, s, dst, data, src_is_dir};
    return PK_OK;
}

/* Is path at or below a path already bound? */
static int covered(const sb_plan *p, const char *path) {
    for (int i = 0; i < p->n_binds; i++) {
        size_t n = strlen(p->binds[i]);
        if (strncmp(path, p->binds[i], n) == 0 && (path[n] == '\0' || path[n] == '/' || n == 1))
            return 1;
    }
    return 0;
}

static int remember_bind(sb_plan *p, const char *path, pk_error *err) {
    if (p->n_binds == p->cap_binds) {
        int cap = p->cap_binds ? 2 * p->cap_binds : 32;
        char **n = realloc(p->binds, (size_t)cap * sizeof *n);
        if (!n)
            return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
        p->binds = n;
        p->cap_binds = cap;
    }
    if (!(p->binds[p->n_binds] = strdup(path)))
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    p->n_binds++;
    return PK_OK;
}

/* Lexically normalizes an absolute path in place: no "//", "." or "..". */
static void normalize(char *path) {
    char out[PATH_MAX];
    size_t o = 0;
    const char *s = path;
    while (*s) {
        while (*s == '/')
            s++;
        const char *e = s;
        while (*e && *e != '/')
            e++;
        size_t n = (size_t)(e - s);
        if (n == 0 || (n == 1 && s[0] == '.')) {
        } else if (n == 2 && s[0] == '.' && s[1] == '.') {
            while (o > 0 && out[o - 1] != '/')
                o--;
            if (o > 0)
                o--;
        } else if (o + n + 1 < sizeof out) {
            out[o++] = '/';
            memcpy(out + o, s, n);
            o += n;
        }
        s = e;
    }
    if (o == 0)
        out[o++] = '/';
    out[o] = '\0';
    memcpy(path, out, o + 1);
}

/* Makes host `path` visible at the same path inside: every symlink on the way becomes the same
 * symlink inside, and the final file or directory is bound. Missing paths: PK_ERR_NOT_FOUND. */
static int add_visible(sb_plan *p, const char *path, sb_op_kind bind, int depth, pk_error *err) {
    if (depth > 16)
        return pk_error_set(err, PK_ERR_INVALID, "too many symlinks in %s", path);
    if (path[0] != '/' || strlen(path) >= PATH_MAX - 1)
        return pk_error_set(err, PK_ERR_INVALID, "sandbox paths must be absolute: %s", path);
    char full[PATH_MAX];
    snprintf(full, sizeof full, "%s", path);
    normalize(full);
    char cur[PATH_MAX] = "";
    size_t cur_len = 0;
    const char *s = full;
    while (*s) {
        while (*s == '/')
            s++;
        if (!*s)
            break;
        const char *e = strchr(s, '/');
        if (!e)
            e = s + strlen(s);
        cur[cur_len++] = '/';
        memcpy(cur + cur_len, s, (size_t)(e - s));
        cur_len += (size_t)(e - s);
        cur[cur_len] = '\0';
        s = e;
        struct stat st;
        if (lstat(cur, &st))
            return pk_error_errno(err, errno == ENOENT ? PK_ERR_NOT_FOUND : PK_ERR_IO, "%s", cur);
        if (!S_ISLNK(st.st_mode))
            continue;
        char target[PATH_MAX];
        ssize_t n = readlink(cur, target, sizeof target - 1);
        if (n < 0)
            return pk_error_errno(err, PK_ERR_IO, "readlink %s", cur);
        target[n] = '\0';
        /* Inside a bound tree the link is already there; what it points to may not be. */
        if (!covered(p, cur)) {
            char *data = own(p, strdup(target));
            if (!data)
                return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
            int rc = add_op(p, SB_OP_SYMLINK, NULL, cur, data, 0, err);
            if (rc)
                return rc;
        }
        char next[2 * PATH_MAX + 2];
        if (target[0] == '/') {
            snprintf(next, sizeof next, "%s%s", target, s);
        } else {
            char *slash = strrchr(cur, '/');
            *slash = '\0';
            snprintf(next, sizeof next, "%s/%s%s", cur, target, s);
        }
        if (strlen(next) >= PATH_MAX)
            return pk_error_set(err, PK_ERR_INVALID, "path too long: %s", next);
        return add_visible(p, next, bind, depth + 1, err);
    }
    if (bind == SB_OP_BIND_RO && covered(p, full))
        return PK_OK;
    struct stat st;
    if (stat(full, &st))
        return pk_error_errno(err, PK_ERR_NOT_FOUND, "%s", full);
    int rc = add_op(p, bind, full, full, NULL, S_ISDIR(st.st_mode), err);
    return rc ? rc : remember_bind(p, full, err);
}

/* Prefixes err's message with what was being added. */
static int wrap_error(pk_error *err, int rc, const char *what, const char *path) {
    char inner[sizeof err->message];
    snprintf(inner, sizeof inner, "%s", err ? err->message : "");
    return pk_error_set(err, rc, "%s %.200s: %.300s", what, path, inner);
}

/* Only the capability nodes any user may open (MIG compute-instance access, mode 0444). The
 * MIG config and monitor capabilities (0400) would let a job that is host uid 0 reconfigure
 * the GPUs. */
static int add_nvidia_caps(sb_plan *p, const char *devroot, pk_error *err) {
    char dir[PATH_MAX], src[PATH_MAX + 256], dst[320];
    snprintf(dir, sizeof dir, "%s/nvidia-caps", devroot);
    DIR *d = opendir(dir);
    if (!d)
        return PK_OK;
    int rc = add_op(p, SB_OP_MKDIR, NULL, "/dev/nvidia-caps", NULL, 1, err);
    for (struct dirent *e; !rc && (e = readdir(d));) {
        struct stat st;
        snprintf(src, sizeof src, "%s/%s", dir, e->d_name);
        if (e->d_name[0] == '.' || lstat(src, &st) || S_ISDIR(st.st_mode) || S_ISLNK(st.st_mode) ||
            !(st.st_mode & S_IROTH))
            continue;
        snprintf(dst, sizeof dst, "/dev/nvidia-caps/%s", e->d_name);
        rc = add_op(p, SB_OP_BIND_DEV, src, dst, NULL, 0, err);
    }
    closedir(d);
    return rc;
}

/* The job's GPUs: each index (PCI bus order) is mapped through the driver to its node,
 * /dev/nvidia<minor>, bound under the same name (the driver opens it by minor), and to the
 * CUDA_VISIBLE_DEVICES that names exactly those GPUs inside (pk_gpu_nodes_visible). */
static int add_gpu_nodes(sb_plan *p, const pk_sandbox_opts *opts, const char *devroot,
                         pk_error *err) {
    pk_gpu_nodes *m = malloc(sizeof *m);
    if (!m)
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    char src[PATH_MAX], dst[64], visible[2048];
    int rc = pk_gpu_nodes_read(NULL, m, err);
    for (int i = 0; !rc && i < opts->n_gpus; i++) {
        const pk_gpu_node *g = pk_gpu_nodes_lookup(m, opts->gpus[i], err);
        if (!g) {
            rc = PK_ERR_NOT_FOUND;
            break;
        }
        snprintf(src, sizeof src, "%s/nvidia%d", devroot, g->minor);
        snprintf(dst, sizeof dst, "/dev/nvidia%d", g->minor);
        if (!pk_path_exists(src))
            rc = pk_error_set(err, PK_ERR_NOT_FOUND, "GPU %d (%s, minor %d): %s not present",
                              opts->gpus[i], g->bus_id, g->minor, src);
        else
            rc = add_op(p, SB_OP_BIND_DEV, src, dst, NULL, 0, err);
    }
    if (!rc)
        rc = pk_gpu_nodes_visible(m, opts->gpus, opts->n_gpus, visible, sizeof visible, err);
    if (!rc && !(p->cuda_visible = strdup(visible)))
        rc = pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    free(m);
    return rc;
}

static int add_devices(sb_plan *p, const pk_sandbox_opts *opts, pk_error *err) {
    static const char *const basic[] = {"null", "zero", "full", "random", "urandom", NULL};
    static const char *const gpu_ctl[] = {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", NULL};
    /* PKGYM_SANDBOX_DEVROOT lets tests stand in fake nvidia nodes on GPU-less hosts. */
    const char *devroot = getenv("PKGYM_SANDBOX_DEVROOT");
    char src[PATH_MAX], dst[64];
    for (int i = 0; i < opts->n_gpus; i++)
        if (opts->gpus[i] < 0 || opts->gpus[i] >= PK_GPU_NODES_MAX)
            return pk_error_set(err, PK_ERR_INVALID, "bad GPU index %d", opts->gpus[i]);
    int rc = add_op(p, SB_OP_MKDIR, NULL, "/dev", NULL, 1, err);
    for (int i = 0; !rc && basic[i]; i++) {
        snprintf(src, sizeof src, "/dev/%s", basic[i]);
        if (pk_path_exists(src))
            rc = add_op(p, SB_OP_BIND_DEV, src, src, NULL, 0, err);
    }
    for (int i = 0; !rc && opts->n_gpus > 0 && gpu_ctl[i]; i++) {
        snprintf(src, sizeof src, "%s/%s", devroot ? devroot : "/dev", gpu_ctl[i]);
        snprintf(dst, sizeof dst, "/dev/%s", gpu_ctl[i]);
        struct stat st;
        if (stat(src, &st) == 0)
            rc = add_op(p, SB_OP_BIND_DEV, src, dst, NULL, S_ISDIR(st.st_mode), err);
    }
    if (!rc && opts->n_gpus > 0)
        rc = add_nvidia_caps(p, devroot ? devroot : "/dev", err);
    if (!rc && opts->n_gpus > 0)
        rc = add_gpu_nodes(p, opts, devroot ? devroot : "/dev", err);
    if (!rc)
        rc = add_op(p, SB_OP_SYMLINK, NULL, "/dev/fd", "/proc/self/fd", 0, err);
    if (!rc)
        rc = add_op(p, SB_OP_SYMLINK, NULL, "/dev/stdin", "/proc/self/fd/0", 0, err);
    if (!rc)
        rc = add_op(p, SB_OP_SYMLINK, NULL, "/dev/stdout", "/proc/self/fd/1", 0, err);
    if (!rc)
        rc = add_op(p, SB_OP_SYMLINK, NULL, "/dev/stderr", "/proc/self/fd/2", 0, err);
    if (!rc)
        rc = add_op(p, SB_OP_TMPFS, NULL, "/dev/shm", "size=1g,nr_inodes=4096,mode=1777", 1, err);
    return rc;
}

/* The read-only set: defaults (missing ones skipped), PKGYM_SANDBOX_RO, then opts->ro
 * (missing ones are an error: the caller asked for them). */
static int add_read_only(sb_plan *p, const pk_sandbox_opts *opts, pk_error *err) {
    for (int i = 0; pk_sandbox_default_ro[i]; i++) {
        int rc = add_visible(p, pk_sandbox_default_ro[i], SB_OP_BIND_RO, 0, err);
        if (rc && rc != PK_ERR_NOT_FOUND)
            return rc;
    }
    const char *extra = getenv("PKGYM_SANDBOX_RO");
    if (extra && *extra) {
        char *copy = strdup(extra), *save = NULL;
        if (!copy)
            return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
        int rc = PK_OK;
        for (char *t = strtok_r(copy, ":", &save); t && !rc; t = strtok_r(NULL, ":", &save))
            rc = add_visible(p, t, SB_OP_BIND_RO, 0, err);
        free(copy);
        if (rc)
            return wrap_error(err, rc, "PKGYM_SANDBOX_RO", extra);
    }
    if (opts->n_gpus > 0) { /* CUDA reads PCI topology and driver state from /sys */
        int rc = add_visible(p, "/sys", SB_OP_BIND_RO, 0, err);
        if (rc)
            return rc;
    }
    for (int i = 0; i < opts->n_ro; i++) {
        int rc = add_visible(p, opts->ro[i], SB_OP_BIND_RO, 0, err);
        if (rc)
            return wrap_error(err, rc, "read-only path", opts->ro[i]);
    }
    return PK_OK;
}

/* Directories the caller keeps out of view inside its binds: each becomes an empty read-only
 * tmpfs, after the binds it lies in. */
static int add_hidden(sb_plan *p, const pk_sandbox_opts *opts, pk_error *err) {
    for (int i = 0; i < opts->n_hide; i++) {
        char *real = realpath(opts->hide[i], NULL);
        struct stat st;
        if (!real)
            continue; /* nothing there to hide */
        int rc = PK_OK;
        if (stat(real, &st) == 0 && S_ISDIR(st.st_mode) && covered(p, real))
            rc = add_op(p, SB_OP_HIDE, NULL, real, NULL, 1, err);
        free(real);
        if (rc)
            return rc;
    }
    return PK_OK;
}

/* A writable bind must not contain the per-job roots (nor be "/"): it would show the host's
 * temp area, other jobs' roots and work dirs included, writable. */
static int check_writable(const sb_plan *p, const char *path, pk_error *err) {
    char *real = realpath(path, NULL);
    if (!real)
        return pk_error_errno(err, PK_ERR_NOT_FOUND, "read-write path %s", path);
    size_t n = strlen(real);
    int bad = n == 1 || (strncmp(p->root, real, n) == 0 && p->root[n] == '/');
    free(real);
    return bad ? pk_error_set(err, PK_ERR_INVALID,
                              "read-write path %s contains the sandbox's temp area", path)
               : PK_OK;
}

int sb_plan_build(sb_plan *p, const pk_sandbox_opts *opts, const char *workdir, pk_error *err) {
    memset(p, 0, sizeof *p);
    const char *base = getenv("PKGYM_SANDBOX_TMP");
    char tmpl[PATH_MAX];
    snprintf(tmpl, sizeof tmpl, "%s/pk-sbroot-%d-XXXXXX", base && *base ? base : "/tmp",
             (int)getpid());
    if (!mkdtemp(tmpl))
        return pk_error_errno(err, PK_ERR_IO, "mkdtemp %s", tmpl);
    if (!(p->root = strdup(tmpl))) {
        rmdir(tmpl);
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    }
    /* The private file systems come first, so that binds of paths below them (a work dir or an
     * extra path under /tmp) land on top of them rather than under. */
    int rc = add_op(p, SB_OP_TMPFS, NULL, p->root, "size=16m,nr_inodes=4096,mode=0755", 1, err);
    if (!rc)
        rc = add_op(p, SB_OP_PROC, NULL, "/proc", NULL, 1, err);
    /* Writable or host-wide knobs in procfs stay read-only (the command may be host uid 0). */
    static const char *const protect[] = {
        "/proc/sys", "/proc/sysrq-trigger", "/proc/irq",  "/proc/bus",
        "/proc/fs",  "/proc/latency_stats", "/proc/acpi", NULL};
    for (int i = 0; !rc && protect[i]; i++)
        rc = add_op(p, SB_OP_PROTECT, NULL, protect[i], NULL, 0, err);
    if (!rc)
        rc = add_devices(p, opts, err);
    if (!rc)
        rc = add_op(p, SB_OP_TMPFS, NULL, "/tmp", "size=1g,nr_inodes=65536,mode=1777", 1, err);
    if (!rc)
        rc = add_read_only(p, opts, err);
    if (!rc)
        rc = add_op(p, SB_OP_WRITE_FILE, NULL, "/etc/hosts", sb_hosts, 0, err);
    if (!rc)
        rc = add_hidden(p, opts, err);
    if (!rc)
        rc = check_writable(p, workdir, err);
    if (!rc)
        rc = add_visible(p, workdir, SB_OP_BIND_RW, 0, err);
    for (int i = 0; !rc && i < opts->n_rw; i++) {
        rc = check_writable(p, opts->rw[i], err);
        if (!rc && (rc = add_visible(p, opts->rw[i], SB_OP_BIND_RW, 0, err)))
            wrap_error(err, rc, "read-write path", opts->rw[i]);
    }
    if (rc) {
        sb_plan_free(p);
        return rc;
    }
    return PK_OK;
}

void sb_plan_free(sb_plan *p) {
    if (p->root)
        rmdir(p->root);
    free(p->root);
    free(p->cuda_visible);
    for (int i = 0; i < p->n_owned; i++)
        free(p->owned[i]);
    for (int i = 0; i < p->n_binds; i++)
        free(p->binds[i]);
    free(p->owned);
    free(p->binds);
    free(p->ops);
    memset(p, 0, sizeof *p);
}
