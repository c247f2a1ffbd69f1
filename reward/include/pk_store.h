/* pk_store: the SQLite (WAL) trajectory store. One connection per thread; readers (read-only
 * connections) may run beside the one writer.
 *
 * Every turn is committed when pk_store_add_turn returns (synchronous=FULL), so a kill -9
 * of the server loses at most the steps in flight. Schema: docs/rewards.md.
 */
#ifndef PK_STORE_H
#define PK_STORE_H

#include "pk_common.h"
#include "pk_turn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pk_store pk_store;

/* Opens (creating the file and schema when needed) for writing. A store of an older schema
 * version is migrated in place, in one transaction (docs/rewards.md). */
int pk_store_open(const char *path, pk_store **out, pk_error *err);
/* Opens an existing store read-only (pkgym reward, pkgym export); older schema versions are
 * read as if migrated (turns 1-based, no prompts), without writing. */
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

/* Stores turn t of the episode (t->turn from 1; prompt, result_json and the other texts may be
 * NULL). Committed on return. */
int pk_store_add_turn(pk_store *s, const char *episode_id, const pk_turn *t, pk_error *err);
/* Stores t[0..n), consecutive turns of one episode, in one transaction: every turn before t[0]
 * must be stored already (else PK_ERR_INVALID and nothing changes), rows of the same numbers are
 * replaced, and stored turns after t[n-1] are deleted. So the episode's stored turns are always
 * 1..k without a gap, whatever failed before (a full disk: the server sends the unstored turns
 * again with the next one). Committed on return; on any failure nothing is written. */
int pk_store_put_turns(pk_store *s, const char *episode_id, const pk_turn *t, int n, pk_error *err);
/* Records the online returns (n must equal the number of stored turns) and finished_at. */
int pk_store_finish_episode(pk_store *s, const char *episode_id, const double *returns, int n,
                            pk_error *err);

/* One episode read back: its row and turns as they were written (strings owned by it). */
typedef struct pk_store_episode {
    pk_episode_row row;    /* seed: the one in effect (drawn by the server when the client gave
                              none); -1 only in episodes stored before seeds were drawn */
    double finished_at;    /* 0 until the returns are recorded */
    int finished;          /* the returns were recorded */
    int returns_malformed; /* recorded, but not an array of n_turns numbers (never in an
                              episode pk_store_read_episode returns) */
    double *returns;       /* n_turns of them when finished, else NULL */
    int n_turns;
    pk_turn *turns; /* ordered by turn (1-based), texts included */
} pk_store_episode;

/* Reads one episode with its turns in one read transaction (a consistent snapshot, safe while
 * another connection writes). *out is NULL, and PK_OK returned, when no episode has that id.
 * Free *out with pk_store_episode_free. */
int pk_store_read_episode(pk_store *s, const char *episode_id, pk_store_episode **out,
                          pk_error *err);
void pk_store_episode_free(pk_store_episode *e);

/* How long this connection waits on another's lock before failing (default 5000 ms). */
void pk_store_set_busy_timeout(pk_store *s, int ms);

#ifdef __cplusplus
}
#endif
#endif
