/* Private to reward/: reads stored episodes back, one at a time, for `pkgym reward`/`export`. */
#ifndef PK_STORE_READER_H
#define PK_STORE_READER_H

#include "pk_store.h"

/* Called once per episode (ordered by creation); the episode is freed after it returns.
 * A non-zero return stops the walk and is returned. */
typedef int (*pk_episode_fn)(const pk_store_episode *e, void *ctx, pk_error *err);

/* Which episodes a walk visits (`--problem`, `--group`, `--episode`, `--since` of pkgym reward
 * and export): values of one field are alternatives (OR), fields combine with AND; an empty
 * field does not filter. */
#define PK_STORE_FILTER_MAX 64
typedef struct pk_store_filter {
    const char *problems[PK_STORE_FILTER_MAX];
    int n_problems;
    const char *groups[PK_STORE_FILTER_MAX];
    int n_groups;
    const char *episodes[PK_STORE_FILTER_MAX];
    int n_episodes;
    double since; /* > 0: episodes created at or after this time (seconds since the epoch) */
} pk_store_filter;

/* with_text: also load prompt, action, summary, code and feedback (export needs them, rewards
 * not); the episodes a walk visits may have malformed returns (flagged, not trusted). filter may be
 * NULL (every episode). */
int pk_store_each_episode(pk_store *s, int with_text, const pk_store_filter *filter,
                          pk_episode_fn fn, void *ctx, pk_error *err);

/* Parses a --since value: seconds since the epoch, an ISO date or time in UTC
 * (2026-11-22, 2026-11-22T10:30, 2026-11-22T10:30:05Z) or an age before now (90s, 30m, 6h,
 * 2d). */
int pk_store_parse_since(const char *text, double now, double *out, pk_error *err);

#endif
