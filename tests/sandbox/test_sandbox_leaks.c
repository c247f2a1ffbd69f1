/* Leak checks: 200 sandboxes back to back, then 8 threads running sandboxes at once, leave no
 * processes, mounts, fds, temp dirs or cgroups behind in this (server-like) process. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pk_sandbox.h"

#define SEQUENTIAL 200
#define THREADS 8
#define PER_THREAD 10

static int count_entries(const char *dir, const char *prefix) {
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.' && strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return n;
}

static int count_lines_with(const char *path, const char *needle) {
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof line, f))
        n += !needle || strstr(line, needle) != NULL;
    fclose(f);
    return n;
}

/* Our job cgroups, in every v1 hierarchy we use and in v2. */
static int count_cgroups(void) {
    char prefix[64];
    snprintf(prefix, sizeof prefix, "pkgym-sb-%d-", (int)getpid());
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (!f)
        return 0;
    char line[1024];
    int n = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        *c2 = '\0';
        char dir[2048];
        if (c1[1] == '\0')
            snprintf(dir, sizeof dir, "/sys/fs/cgroup%s", c2 + 1);
        else
            snprintf(dir, sizeof dir, "/sys/fs/cgroup/%s%s", c1 + 1, c2 + 1);
        n += count_entries(dir, prefix);
    }
    fclose(f);
    return n;
}

typedef struct snapshot {
    int fds, mounts, tmp_root, tmp_work, cgroups;
} snapshot;

static snapshot take(void) {
    char root[64], work[64];
    snprintf(root, sizeof root, "pk-sbroot-%d-", (int)getpid());
    snprintf(work, sizeof work, "pk-sbwork-%d-", (int)getpid());
    snapshot s = {count_entries("/proc/self/fd", ""),
                  count_lines_with("/proc/self/mountinfo", NULL), count_entries("/tmp", root),
                  count_entries("/tmp", work), count_cgroups()};
    return s;
}

/* Temp dirs and cgroups are named by pid, and a caller killed mid-job (the env tests SIGKILL
 * servers on purpose) leaves its own behind for good: if this process got such a dead caller's
 * pid, those were there before and are not ours. */
static void assert_unchanged(snapshot before) {
    snapshot after = take();
    assert_int_equal(after.fds, before.fds);
    assert_int_equal(after.mounts, before.mounts);
    assert_int_equal(after.tmp_root, before.tmp_root);
    assert_int_equal(after.tmp_work, before.tmp_work);
    assert_int_equal(after.cgroups, before.cgroups);
    assert_int_equal(count_lines_with("/proc/self/mountinfo", "pk-sb"), 0);
    errno = 0;
    assert_int_equal(waitpid(-1, NULL, WNOHANG | __WALL), -1); /* no child left, not even */
    assert_int_equal(errno, ECHILD);                           /* a zombie */
}

/* A job that leaves a background process and a file in its private /tmp. */
static int run_one(void) {
    char *argv[] = {"/bin/sh", "-c", "sleep 30 & echo x > /tmp/f; exit 0", NULL};
    pk_sandbox_opts o = {0};
    o.wall_ms = 20000;
    pk_sandbox_result r;
    pk_error err = {0};
    if (pk_sandbox_run(&o, argv, &r, &err))
        return -1;
    int ok = r.status == PK_SB_OK;
    if (!ok)
        fprintf(stderr, "verdict %s: %s\n", pk_sb_status_name(r.status), r.detail);
    pk_sandbox_result_free(&r);
    return ok ? 0 : -1;
}

static void back_to_back(void **state) {
    (void)state;
    snapshot before = take();
    int failed = 0;
    for (int i = 0; i < SEQUENTIAL; i++)
        failed += run_one() != 0;
    assert_int_equal(failed, 0);
    assert_unchanged(before);
}

static void *worker(void *arg) {
    int *failed = arg;
    for (int i = 0; i < PER_THREAD; i++)
        *failed += run_one() != 0;
    return NULL;
}

static void in_parallel(void **state) {
    (void)state;
    snapshot before = take();
    pthread_t t[THREADS];
    int failed[THREADS] = {0};
    for (int i = 0; i < THREADS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, worker, &failed[i]), 0);
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(failed[i], 0);
    }
    assert_unchanged(before);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(back_to_back),
        cmocka_unit_test(in_parallel),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
