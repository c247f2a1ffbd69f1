/* pk_baseline_cache: the reference's measured time per (problem, sizes, world size, GPU model,
 * driver, NCCL version), so steps need not time the reference again. The key is hashed
 * into a file name; the file holds the full key (checked on lookup) and the time. */
#ifndef PK_BASELINE_CACHE_H
#define PK_BASELINE_CACHE_H

#include "pk_common.h"

typedef struct pk_baseline_key {
    const char *problem_id;
    const char *meta_json; /* hashed: sizes, timing settings */
    int world_size;
    const char *device; /* GPU model, or "host" */
    const char *driver;
    const char *nccl;
} pk_baseline_key;

/* Uses <root>/baseline (created). */
int pk_baseline_cache_open(const char *root, char **dir_out, pk_error *err);
/* 1 and *us when cached, 0 otherwise. */
int pk_baseline_cache_lookup(const char *dir, const pk_baseline_key *k, double *us);
int pk_baseline_cache_store(const char *dir, const pk_baseline_key *k, double us, pk_error *err);

#endif
