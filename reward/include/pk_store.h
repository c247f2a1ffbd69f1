/* pk_store: the SQLite (WAL) trajectory store. One connection per thread.
 *
 * Every turn is committed when pk_store_add_turn returns (synchronous=FULL), so a kill -9
 * of the server loses at most the steps in flight. Schema: docs/rewards.md.
 */
#ifndef PK_STORE_H
#define PK_STORE_H

#include "pk_common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pk_store pk_store;

/* Opens (creating the file and schema when needed) for writing. */
int pk_store_open(const char *path, pk_store **out, pk_error *err);
/* Opens an existing store read-only (pkgym reward, pkgym export). */
int pk_store_open_readonly(const char *path, pk_store **out, pk_error *err);
void pk_store_close(pk_store *s);

typedef struct pk_episode_row {
    const char *episode_id, *problem_id, *group; /* group may be NULL */
    long long seed;
    int max_turns;
    const char *config_json; /* the episode's config; NULL stores the default reward config */
    double created_at;       /* seconds since the epoch; 0: now */
    const char *task_prompt; /* optional: the problem prompt, for `pkgym export` */
} pk_episode_row;
int pk_store_begin_episode(pk_store *s, const pk_episode_row *e, pk_error *err);

typedef struct pk_turn_row {
    const char *episode_id;
    int turn; /* 0-based */
    const char *action, *summary, *code;
    pk_status status;
    double score;            /* the online score */
    const char *result_json; /* pk_eval_result JSON; NULL when there was no evaluation */
    const char *feedback;
    double started_at, finished_at;
} pk_turn_row;
/* Committed on return. */
int pk_store_add_turn(pk_store *s, const pk_turn_row *t, pk_error *err);
/* Records the online returns (n must equal the number of stored turns) and finished_at. */
int pk_store_finish_episode(pk_store *s, const char *episode_id, const double *returns, int n,
                            pk_error *err);

#ifdef __cplusplus
}
#endif
#endif
