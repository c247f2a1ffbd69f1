/* pk_baseline_cache: the reference's measured time per (problem, sizes, world size, GPU model,
 * driver, NCCL version), so steps need not time the reference again. The key is hashed
 * into a file name; the file holds the full key (checked on lookup) and the measurement: its
 * median, CV, repetitions and when it was taken. An entry whose CV is high, whose age passes a
 * limit, or that lacks those facts (an older cache) is measured again (pk_baseline_stale). */
#ifndef PK_BASELINE_CACHE_H
#define PK_BASELINE_CACHE_H

#include "pk_common.h"

#define PK_BASELINE_DEFAULT_MAX_CV 0.1        /* 10 % */
#define PK_BASELINE_DEFAULT_MAX_AGE_S 86400.0 /* one day */

typedef struct pk_baseline_key {
    const char *problem_id;
    const char *meta_json; /* hashed: sizes, timing settings */
    int world_size;
    const char *device; /* GPU model, or "host" */
    const char *driver;
    const char *nccl;
} pk_baseline_key;

typedef struct pk_baseline_entry {
    double us;          /* median of the reference, > 0 */
    double cv;          /* its coefficient of variation; < 0: unknown (an older entry) */
    int iters;          /* timed iterations; 0: unknown */
    double measured_at; /* seconds since the epoch; 0: unknown */
} pk_baseline_entry;

/* Uses <root>/baseline (created). */
int pk_baseline_cache_open(const char *root, char **dir_out, pk_error *err);
/* 1 and *out when an entry exists for k (fresh or not), 0 otherwise. */
int pk_baseline_cache_lookup(const char *dir, const pk_baseline_key *k, pk_baseline_entry *out);
int pk_baseline_cache_store(const char *dir, const pk_baseline_key *k, const pk_baseline_entry *e,
                            pk_error *err);
/* NULL when e may be used at time `now`; else why it must be measured again (a static string
 * filled in `why`). max_cv, max_age_s <= 0: the defaults above. */
const char *pk_baseline_stale(const pk_baseline_entry *e, double now, double max_cv,
                              double max_age_s, char *why, size_t why_cap);

#endif
