/* Private to reward/: reads stored episodes back, one at a time, for `pkgym reward`/`export`. */
#ifndef PK_STORE_READER_H
#define PK_STORE_READER_H

#include "pk_store.h"

typedef struct pk_stored_turn {
    int turn;
    pk_status status;
    double score;                                           /* online */
    char *result_json, *action, *summary, *code, *feedback; /* NULL when absent */
    double started_at, finished_at;
} pk_stored_turn;

typedef struct pk_stored_episode {
    char *id, *problem_id, *group, *config_json, *task_prompt;
    long long seed;
    int max_turns;
    double created_at, finished_at;
    int finished;           /* returns were recorded */
    int returns_malformed;  /* recorded, but not an array of n_turns numbers */
    double *online_returns; /* n_turns of them when finished */
    int n_turns;
    pk_stored_turn *turns;
} pk_stored_episode;

/* Called once per episode (ordered by creation); the episode is freed after it returns.
 * A non-zero return stops the walk and is returned. */
typedef int (*pk_episode_fn)(const pk_stored_episode *e, void *ctx, pk_error *err);

/* with_text: also load action, summary, code and feedback (export needs them, rewards not). */
int pk_store_each_episode(pk_store *s, int with_text, pk_episode_fn fn, void *ctx, pk_error *err);

#endif
