/* Baseline cache on disk: <root>/baseline/<sha256(key)>.txt holding
 * "key\nus=<median> cv=<cv> iters=<n> measured_at=<epoch s>\n". Entries of the first format
 * ("key\n<median>\n") still read, with an unknown CV and time, so they are measured again. */
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

/* The measurement line: "us=.. cv=.. iters=.. measured_at=.." or, from the first format, a
 * bare number. */
static int parse_entry(const char *text, pk_baseline_entry *e) {
    *e = (pk_baseline_entry){.cv = -1};
    char *end = NULL;
    if (strncmp(text, "us=", 3) != 0) {
        e->us = strtod(text, &end);
        return end != text && e->us > 0 ? 0 : -1;
    }
    double cv, at;
    int iters, used = 0;
    if (sscanf(text, "us=%lf cv=%lf iters=%d measured_at=%lf%n", &e->us, &cv, &iters, &at, &used) !=
            4 ||
        used == 0 || !(e->us > 0))
        return -1;
    e->cv = cv >= 0 ? cv : -1;
    e->iters = iters > 0 ? iters : 0;
    e->measured_at = at > 0 ? at : 0;
    return 0;
}

int pk_baseline_cache_lookup(const char *dir, const pk_baseline_key *k, pk_baseline_entry *out) {
    char line[1024], path[4096];
    if (!dir || key_and_path(dir, k, line, sizeof line, path, sizeof path))
        return 0;
    char *data = NULL;
    size_t len = 0;
    if (pk_read_file(path, &data, &len, NULL))
        return 0;
    size_t kl = strlen(line);
    int hit = len > kl && strncmp(data, line, kl) == 0 && data[kl] == '\n' &&
              parse_entry(data + kl + 1, out) == 0;
    free(data);
    return hit;
}

int pk_baseline_cache_store(const char *dir, const pk_baseline_key *k, const pk_baseline_entry *e,
                            pk_error *err) {
    char line[1024], path[4096], tmp[4200], text[1200];
    if (!(e->us > 0))
        return pk_error_set(err, PK_ERR_INVALID, "baseline time must be positive");
    if (key_and_path(dir, k, line, sizeof line, path, sizeof path))
        return pk_error_set(err, PK_ERR_INVALID, "baseline key too long");
    int n = snprintf(text, sizeof text, "%s\nus=%.17g cv=%.17g iters=%d measured_at=%.17g\n", line,
                     e->us, e->cv, e->iters, e->measured_at);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%u", path, (long)getpid(), atomic_fetch_add(&tmp_seq, 1));
    int rc = pk_write_file_private(tmp, text, (size_t)n, err);
    if (!rc && rename(tmp, path) != 0)
        rc = pk_error_errno(err, PK_ERR_IO, "rename %s", path);
    if (rc)
        unlink(tmp);
    return rc;
}

const char *pk_baseline_stale(const pk_baseline_entry *e, double now, double max_cv,
                              double max_age_s, char *why, size_t why_cap) {
    max_cv = max_cv > 0 ? max_cv : PK_BASELINE_DEFAULT_MAX_CV;
    max_age_s = max_age_s > 0 ? max_age_s : PK_BASELINE_DEFAULT_MAX_AGE_S;
    if (e->cv < 0 || e->measured_at <= 0)
        snprintf(why, why_cap, "its CV and time are not recorded (an older cache entry)");
    else if (e->cv > max_cv)
        snprintf(why, why_cap, "its CV %.3f is above %.3f", e->cv, max_cv);
    else if (now - e->measured_at > max_age_s)
        snprintf(why, why_cap, "it is %.0f s old, more than %.0f s", now - e->measured_at,
                 max_age_s);
    else
        return NULL;
    return why;
}
