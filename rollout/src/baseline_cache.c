/* Baseline cache on disk: <root>/baseline/<sha256(key)>.txt holding "key\nmicroseconds\n". */
#include "pk_baseline_cache.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static atomic_uint tmp_seq; /* unique temporary names across threads */

int pk_baseline_cache_open(const char *root, char **dir_out, pk_error *err) {
    *dir_out = pk_path_join(root, "baseline");
    if (!*dir_out)
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    int rc = pk_mkdir_private(root, NULL, err);
    if (!rc)
        rc = pk_mkdir_private(*dir_out, NULL, err);
    if (rc) {
        free(*dir_out);
        *dir_out = NULL;
    }
    return rc;
}

/* The key line and the entry's path. */
static int key_and_path(const char *dir, const pk_baseline_key *k, char *line, size_t line_cap,
                        char *path, size_t path_cap) {
    char meta[65], name[65];
    pk_sha256_hex(k->meta_json ? k->meta_json : "", k->meta_json ? strlen(k->meta_json) : 0, meta);
    int n = snprintf(line, line_cap, "problem=%s meta=%s world=%d device=%s driver=%s nccl=%s",
                     k->problem_id, meta, k->world_size, k->device, k->driver, k->nccl);
    if (n < 0 || (size_t)n >= line_cap)
        return -1;
    pk_sha256_hex(line, (size_t)n, name);
    n = snprintf(path, path_cap, "%s/%s.txt", dir, name);
    return n < 0 || (size_t)n >= path_cap ? -1 : 0;
}

int pk_baseline_cache_lookup(const char *dir, const pk_baseline_key *k, double *us) {
    char line[1024], path[4096];
    if (!dir || key_and_path(dir, k, line, sizeof line, path, sizeof path))
        return 0;
    char *data = NULL;
    size_t len = 0;
    if (pk_read_file(path, &data, &len, NULL))
        return 0;
    size_t kl = strlen(line);
    int hit = 0;
    if (len > kl && strncmp(data, line, kl) == 0 && data[kl] == '\n') {
        char *end = NULL;
        double v = strtod(data + kl + 1, &end);
        if (end != data + kl + 1 && v > 0) {
            *us = v;
            hit = 1;
        }
    }
    free(data);
    return hit;
}

int pk_baseline_cache_store(const char *dir, const pk_baseline_key *k, double us, pk_error *err) {
    char line[1024], path[4096], tmp[4200], text[1100];
    if (!(us > 0))
        return pk_error_set(err, PK_ERR_INVALID, "baseline time must be positive");
    if (key_and_path(dir, k, line, sizeof line, path, sizeof path))
        return pk_error_set(err, PK_ERR_INVALID, "baseline key too long");
    int n = snprintf(text, sizeof text, "%s\n%.17g\n", line, us);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%u", path, (long)getpid(), atomic_fetch_add(&tmp_seq, 1));
    int rc = pk_write_file_private(tmp, text, (size_t)n, err);
    if (!rc && rename(tmp, path) != 0)
        rc = pk_error_errno(err, PK_ERR_IO, "rename %s", path);
    if (rc)
        unlink(tmp);
    return rc;
}
