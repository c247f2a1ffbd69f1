/* Per-job cgroups (v1 or v2), created below the caller's own cgroup. Where the host does not
 * let us create or use them, the job runs without and the note says why. */
#define _GNU_SOURCE
#include "sb_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static unsigned long sb_cg_seq;

/* snprintf that reports truncation (a truncated cgroup path would name the wrong group). */
static int __attribute__((format(printf, 3, 4))) fmt(char *dst, size_t cap, const char *f, ...) {
    va_list ap;
    va_start(ap, f);
    int n = vsnprintf(dst, cap, f, ap);
    va_end(ap);
    return n < 0 || (size_t)n >= cap ? (errno = ENAMETOOLONG, -1) : 0;
}

static int write_str(const char *dir, const char *file, const char *value) {
    char path[700];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = write(fd, value, strlen(value));
    int saved = errno;
    close(fd);
    errno = saved;
    return n == (ssize_t)strlen(value) ? 0 : -1;
}

static int read_str(const char *dir, const char *file, char *buf, size_t cap) {
    char path[700];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, cap - 1);
    close(fd);
    if (n < 0)
        return -1;
    buf[n] = '\0';
    return 0;
}

/* Value of "key N" in a flat keyed file (memory.events, memory.oom_control, cpu.stat). */
static long keyed_value(const char *dir, const char *file, const char *key) {
    char buf[2048];
    if (read_str(dir, file, buf, sizeof buf))
        return -1;
    size_t kl = strlen(key);
    for (char *line = buf; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL)
        if (strncmp(line, key, kl) == 0 && line[kl] == ' ')
            return strtol(line + kl + 1, NULL, 10);
    return -1;
}

/* The caller's path in the hierarchy that holds `controller` ("" for v2's unified one). */
static int own_cgroup(const char *controller, char *hier, size_t hier_cap, char *path,
                      size_t path_cap) {
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (!f)
        return -1;
    char line[1024];
    int found = -1;
    while (fgets(line, sizeof line, f)) {
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c2 = '\0';
        char *nl = strchr(c2 + 1, '\n');
        if (nl)
            *nl = '\0';
        const char *list = c1 + 1;
        int match = 0;
        if (!*controller) {
            match = *list == '\0';
        } else {
            char copy[256], *save = NULL;
            snprintf(copy, sizeof copy, "%s", list);
            for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save))
                match |= strcmp(t, controller) == 0;
        }
        if (match) {
            snprintf(hier, hier_cap, "%s", list);
            snprintf(path, path_cap, "%s", c2 + 1);
            found = 0;
            break;
        }
    }
    fclose(f);
    return found;
}

/* Creates the job's directory in the v1 hierarchy of `controller`. */
static int make_v1(const char *controller, const char *name, char *out, size_t cap) {
    char hier[256], path[512];
    if (own_cgroup(controller, hier, sizeof hier, path, sizeof path))
        return -1;
    char mnt[300];
    snprintf(mnt, sizeof mnt, "/sys/fs/cgroup/%s", hier);
    if (access(mnt, F_OK))
        snprintf(mnt, sizeof mnt, "/sys/fs/cgroup/%s", controller);
    if (fmt(out, cap, "%s%s/%s", mnt, strcmp(path, "/") ? path : "", name))
        return -1;
    return mkdir(out, 0755);
}

/* Returns 1 if a directory of that name was already there in some hierarchy. */
static int create_v1(sb_cgroup *cg, const char *name, long mem_mb, int pids) {
    char v[64];
    int clash = 0;
    cg->version = 1;
    if (make_v1("memory", name, cg->mem, sizeof cg->mem) == 0) {
        cg->has_mem = 1;
        if (mem_mb > 0) {
            snprintf(v, sizeof v, "%ld", mem_mb * 1024 * 1024);
            if (write_str(cg->mem, "memory.limit_in_bytes", v)) {
                cg->has_mem = 0;
                snprintf(cg->note, sizeof cg->note, "memory.limit_in_bytes: %s", strerror(errno));
            } else {
                write_str(cg->mem, "memory.memsw.limit_in_bytes", v); /* absent without swap */
            }
        }
    } else {
        clash |= errno == EEXIST;
        cg->mem[0] = '\0';
        snprintf(cg->note, sizeof cg->note, "memory cgroup: %s", strerror(errno));
    }
    if (make_v1("pids", name, cg->pids, sizeof cg->pids) == 0) {
        snprintf(v, sizeof v, "%d", pids + 1); /* + the sandbox's init */
        cg->has_pids = write_str(cg->pids, "pids.max", v) == 0;
    } else {
        clash |= errno == EEXIST;
        cg->pids[0] = '\0';
    }
    if (make_v1("cpuacct", name, cg->cpu, sizeof cg->cpu) == 0) {
        cg->has_cpu = 1;
    } else {
        clash |= errno == EEXIST;
        cg->cpu[0] = '\0';
    }
    return clash;
}

/* Returns 1 if a directory of that name was already there. */
static int create_v2(sb_cgroup *cg, const char *name, long mem_mb, int pids) {
    char hier[16], path[512], v[64], ctl[256];
    cg->version = 2;
    if (own_cgroup("", hier, sizeof hier, path, sizeof path)) {
        snprintf(cg->note, sizeof cg->note, "no cgroup v2 entry in /proc/self/cgroup");
        cg->version = 0;
        return 0;
    }
    char parent[600];
    snprintf(parent, sizeof parent, "/sys/fs/cgroup%s", strcmp(path, "/") ? path : "");
    /* Fails with EBUSY when the parent holds processes (no-internal-process rule). */
    write_str(parent, "cgroup.subtree_control", "+memory"); /* one by one: each may fail alone */
    write_str(parent, "cgroup.subtree_control", "+pids");
    if (fmt(cg->mem, sizeof cg->mem, "%s/%s", parent, name) || mkdir(cg->mem, 0755)) {
        int clash = errno == EEXIST;
        fmt(cg->note, sizeof cg->note, "cgroup v2 mkdir: %s", strerror(errno));
        cg->mem[0] = '\0';
        cg->version = 0;
        return clash;
    }
    if (read_str(cg->mem, "cgroup.controllers", ctl, sizeof ctl))
        ctl[0] = '\0';
    cg->has_cpu = 1; /* cpu.stat's usage_usec exists without the cpu controller */
    if (strstr(ctl, "memory")) {
        cg->has_mem = 1;
        if (mem_mb > 0) {
            snprintf(v, sizeof v, "%ld", mem_mb * 1024 * 1024);
            cg->has_mem = write_str(cg->mem, "memory.max", v) == 0;
            write_str(cg->mem, "memory.swap.max", "0");
        }
    } else {
        snprintf(cg->note, sizeof cg->note, "cgroup v2: memory controller not delegated");
    }
    if (strstr(ctl, "pids")) {
        snprintf(v, sizeof v, "%d", pids + 1);
        cg->has_pids = write_str(cg->mem, "pids.max", v) == 0;
    }
    return 0;
}

/* A job's name, pkgym-sb-<pid>-<n>, is unique among live processes, but a caller killed
 * mid-job (SIGKILL, OOM) cannot remove its cgroups, and pids are reused: a later process with
 * that pid meets them. Such a directory is never ours (our own counter never repeats a name):
 * it is neither joined nor removed, and the job takes the next name instead of running without
 * its cgroup limits. */
#define SB_CG_NAME_TRIES 64

void sb_cgroup_create(sb_cgroup *cg, long mem_mb, int pids) {
    for (int tries = 1;; tries++) {
        memset(cg, 0, sizeof *cg);
        char name[96];
        snprintf(name, sizeof name, "pkgym-sb-%d-%lu", (int)getpid(),
                 __atomic_add_fetch(&sb_cg_seq, 1, __ATOMIC_RELAXED));
        int clash = 0;
        if (access("/sys/fs/cgroup/cgroup.controllers", F_OK) == 0)
            clash = create_v2(cg, name, mem_mb, pids);
        else if (access("/sys/fs/cgroup/memory", F_OK) == 0 ||
                 access("/sys/fs/cgroup/pids", F_OK) == 0)
            clash = create_v1(cg, name, mem_mb, pids);
        else
            snprintf(cg->note, sizeof cg->note, "no cgroup hierarchy under /sys/fs/cgroup");
        if (!clash || tries == SB_CG_NAME_TRIES)
            return;
        sb_cgroup_destroy(cg); /* only what this try made: the clashing directory is "" here */
    }
}

int sb_cgroup_attach(sb_cgroup *cg, int pid) {
    char v[32];
    snprintf(v, sizeof v, "%d", pid);
    int rc = 0;
    /* A controller the job could not join limits nothing: say so through the flags. */
    if (cg->mem[0] && write_str(cg->mem, "cgroup.procs", v)) {
        cg->has_mem = 0;
        if (cg->version == 2) /* one directory holds every controller */
            cg->has_pids = cg->has_cpu = 0;
        rc = -1;
    }
    if (cg->version == 1 && cg->pids[0] && write_str(cg->pids, "cgroup.procs", v)) {
        cg->has_pids = 0;
        rc = -1;
    }
    if (cg->version == 1 && cg->cpu[0] && write_str(cg->cpu, "cgroup.procs", v)) {
        cg->has_cpu = 0;
        rc = -1;
    }
    return rc;
}

long sb_cgroup_oom_kills(const sb_cgroup *cg) {
    if (!cg->has_mem)
        return -1;
    return keyed_value(cg->mem, cg->version == 1 ? "memory.oom_control" : "memory.events",
                       "oom_kill");
}

double sb_cgroup_cpu_ms(const sb_cgroup *cg) {
    char buf[64];
    if (cg->version == 1 && cg->cpu[0] && read_str(cg->cpu, "cpuacct.usage", buf, sizeof buf) == 0)
        return (double)strtoll(buf, NULL, 10) / 1e6;
    if (cg->version == 2 && cg->mem[0]) {
        long us = keyed_value(cg->mem, "cpu.stat", "usage_usec");
        return us < 0 ? -1 : (double)us / 1e3;
    }
    return -1;
}

/* rmdir succeeds once the last task is gone; that can lag the reaping by a moment. */
static void remove_dir(char *dir) {
    if (!dir[0])
        return;
    for (int i = 0; i < 200 && rmdir(dir) && errno == EBUSY; i++)
        nanosleep(&(struct timespec){0, 2 * 1000 * 1000}, NULL);
    dir[0] = '\0';
}

void sb_cgroup_destroy(sb_cgroup *cg) {
    remove_dir(cg->mem);
    remove_dir(cg->pids); /* "" unless v1 */
    remove_dir(cg->cpu);
}
