/* The per-GPU timing lock files (the protocol is problems/runner/rn_gpu_lock.h): the harness
 * makes the directory and the files, and binds each job's own files read-write into its run
 * sandbox (job_run.c), so a job can neither remove nor replace another GPU's lock. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pk_harness.h"

void pk_gpu_lock_dir_default(char *out, size_t cap) {
    const char *env = getenv("PKGYM_LOCK_DIR");
    if (env && *env)
        snprintf(out, cap, "%s", env);
    else
        snprintf(out, cap, "/tmp/pkgym-locks-%u", (unsigned)geteuid());
}

static int make_file(const char *dir, int id, const char *ext, pk_error *err) {
    char path[1024];
    snprintf(path, sizeof path, "%s/gpu%d.%s", dir, id, ext);
    int fd = open(path, O_RDONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
    if (fd < 0)
        return pk_error_errno(err, PK_ERR_IO, "cannot make the GPU lock %s", path);
    struct stat st;
    int ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid();
    close(fd);
    return ok ? PK_OK
              : pk_error_set(err, PK_ERR_IO, "%s is not a regular file of ours: refusing it", path);
}

int pk_gpu_locks_prepare(const char *dir, const int *ids, int n, pk_error *err) {
    int rc = pk_mkdir_private(dir, NULL, err);
    for (int i = 0; !rc && i < n; i++) {
        rc = make_file(dir, ids[i], "turnstile", err);
        if (!rc)
            rc = make_file(dir, ids[i], "lock", err);
    }
    return rc;
}
