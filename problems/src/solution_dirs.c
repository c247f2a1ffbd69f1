/* The problems' solutions/ directories (pk_job.h): reference solutions and known-bad kernels
 * that the harness's tests use. A candidate must not read them, so the job's sandboxes hide
 * them (issue 27, finding 7). */
#define _GNU_SOURCE
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "pk_job.h"

static int push(char ***dirs, int *n, int *cap, const char *path) {
    if (*n == *cap) {
        int c = *cap ? 2 * *cap : 64;
        char **d = realloc(*dirs, (size_t)c * sizeof *d);
        if (!d)
            return -1;
        *dirs = d;
        *cap = c;
    }
    if (!((*dirs)[*n] = strdup(path)))
        return -1;
    (*n)++;
    return 0;
}

static int is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* Appends <dir>/<entry>/solutions for each entry of dir (depth 0: suites, then problems). */
static int scan(const char *dir, int depth, char ***dirs, int *n, int *cap) {
    DIR *d = opendir(dir);
    if (!d)
        return 0; /* nothing to hide there */
    int rc = 0;
    struct dirent *ent;
    while (rc == 0 && (ent = readdir(d))) {
        if (ent->d_name[0] == '.')
            continue;
        char path[4096];
        if (snprintf(path, sizeof path, "%s/%s", dir, ent->d_name) >= (int)sizeof path ||
            !is_dir(path))
            continue;
        if (depth == 0) {
            rc = scan(path, 1, dirs, n, cap);
            continue;
        }
        char sol[4096];
        if (snprintf(sol, sizeof sol, "%s/solutions", path) < (int)sizeof sol && is_dir(sol))
            rc = push(dirs, n, cap, sol);
    }
    closedir(d);
    return rc;
}

int pk_solution_dirs(const char *root, char ***out, int *n) {
    char **dirs = NULL;
    int count = 0, cap = 0;
    if (scan(root, 0, &dirs, &count, &cap)) {
        pk_solution_dirs_free(dirs, count);
        return -1;
    }
    *out = dirs;
    *n = count;
    return 0;
}

void pk_solution_dirs_free(char **dirs, int n) {
    for (int i = 0; i < n; i++)
        free(dirs[i]);
    free(dirs);
}
