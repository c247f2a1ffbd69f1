/* The trajectory store: SQLite in WAL mode, one committed transaction per turn.
 *
 * synchronous=FULL: the WAL is fsynced at every commit, so a turn survives power loss too,
 * not only a kill -9 (for which NORMAL would do). One fsync per step (median 0.3 ms, p99
 * ~15 ms: bench/reward/RESULTS.md) is negligible next to a step that compiles and runs a kernel.
 */
#include "store_internal.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_reward.h"

static const char *const schema_sql =
    "CREATE TABLE IF NOT EXISTS schema_version(version INTEGER NOT NULL);"
    "CREATE TABLE IF NOT EXISTS episodes("
    " id TEXT PRIMARY KEY, problem_id TEXT NOT NULL, group_id TEXT, seed INTEGER NOT NULL,"
    " max_turns INTEGER NOT NULL, config_json TEXT NOT NULL, task_prompt TEXT,"
    " created_at REAL NOT NULL, finished_at REAL, returns_json TEXT);"
    "CREATE TABLE IF NOT EXISTS turns("
    " episode_id TEXT NOT NULL REFERENCES episodes(id), turn INTEGER NOT NULL,"
    " action TEXT, summary TEXT, code TEXT, status TEXT NOT NULL, score REAL NOT NULL,"
    " speedup REAL, time_us REAL, baseline_us REAL, result_json TEXT, feedback TEXT,"
    " started_at REAL, finished_at REAL, prompt TEXT, PRIMARY KEY(episode_id, turn));"
    "CREATE INDEX IF NOT EXISTS episodes_by_problem ON episodes(problem_id, group_id);";

static int db_error(pk_store *s, pk_error *err, const char *what) {
    return pk_error_set(err, PK_ERR_IO, "trajectory store: %s: %s", what, sqlite3_errmsg(s->db));
}

static int exec(pk_store *s, const char *sql, pk_error *err) {
    char *msg = NULL;
    if (sqlite3_exec(s->db, sql, NULL, NULL, &msg) == SQLITE_OK)
        return PK_OK;
    int rc = pk_error_set(err, PK_ERR_IO, "trajectory store: %s", msg ? msg : "exec failed");
    sqlite3_free(msg);
    return rc;
}

static int prepare(pk_store *s, const char *sql, sqlite3_stmt **st, pk_error *err) {
    if (sqlite3_prepare_v2(s->db, sql, -1, st, NULL) != SQLITE_OK)
        return db_error(s, err, "prepare");
    return PK_OK;
}

/* Version 1 -> 2: turns become 1-based (through negative values, so that no two rows ever
 * share a key on the way) and gain the prompt each turn answered (NULL for old turns). */
static const char *const migrate_1_to_2_sql = "ALTER TABLE turns ADD COLUMN prompt TEXT;"
                                              "UPDATE turns SET turn = -1 - turn;"
                                              "UPDATE turns SET turn = -turn;"
                                              "UPDATE schema_version SET version = 2;";

/* Creates the schema, checks the version of an existing one, or migrates an older one. */
static int init_schema(pk_store *s, pk_error *err) {
    int rc = exec(s, "BEGIN IMMEDIATE", err);
    if (rc)
        return rc;
    if ((rc = exec(s, schema_sql, err)))
        goto fail;
    sqlite3_stmt *st = NULL;
    if ((rc = prepare(s, "SELECT version FROM schema_version", &st, err)))
        goto fail;
    int step = sqlite3_step(st);
    int version = step == SQLITE_ROW ? sqlite3_column_int(st, 0) : 0;
    sqlite3_finalize(st);
    if (step == SQLITE_DONE) {
        char sql[80];
        snprintf(sql, sizeof sql, "INSERT INTO schema_version VALUES(%d)", PK_STORE_SCHEMA_VERSION);
        if ((rc = exec(s, sql, err)))
            goto fail;
    } else if (version == 1) {
        if ((rc = exec(s, migrate_1_to_2_sql, err)))
            goto fail;
    } else if (version != PK_STORE_SCHEMA_VERSION) {
        rc = pk_error_set(err, PK_ERR_UNSUPPORTED,
                          "trajectory store: schema version %d, this build reads 1 and %d", version,
                          PK_STORE_SCHEMA_VERSION);
        goto fail;
    }
    s->version = PK_STORE_SCHEMA_VERSION;
    return exec(s, "COMMIT", err);
fail:
    exec(s, "ROLLBACK", NULL);
    return rc;
}

static int open_common(const char *path, int flags, pk_store **out, pk_error *err) {
    *out = NULL;
    if (!path)
        return pk_error_set(err, PK_ERR_INVALID, "trajectory store: no path given");
    pk_store *s = calloc(1, sizeof *s);
    if (!s)
        return pk_error_set(err, PK_ERR_NOMEM, "trajectory store: out of memory");
    s->readonly = (flags & SQLITE_OPEN_READONLY) != 0;
    if (sqlite3_open_v2(path, &s->db, flags, NULL) != SQLITE_OK) {
        int rc = pk_error_set(err, s->readonly ? PK_ERR_NOT_FOUND : PK_ERR_IO,
                              "trajectory store: cannot open '%s': %s", path,
                              s->db ? sqlite3_errmsg(s->db) : "out of memory");
        pk_store_close(s);
        return rc;
    }
    sqlite3_busy_timeout(s->db, 5000);
    *out = s;
    return PK_OK;
}

int pk_store_open(const char *path, pk_store **out, pk_error *err) {
    pk_store *s;
    int rc = open_common(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, &s, err);
    if (rc)
        return rc;
    if ((rc = exec(s, "PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON",
                   err)) ||
        (rc = init_schema(s, err)) ||
        (rc = prepare(s,
                      "INSERT INTO episodes(id, problem_id, group_id, seed, max_turns,"
                      " config_json, task_prompt, created_at) VALUES(?,?,?,?,?,?,?,?)",
                      &s->insert_episode, err)) ||
        (rc = prepare(s,
                      "INSERT INTO turns(episode_id, turn, action, summary, code, status, score,"
                      " speedup, time_us, baseline_us, result_json, feedback, started_at,"
                      " finished_at, prompt) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                      &s->insert_turn, err)) ||
        (rc = prepare(s,
                      "INSERT OR REPLACE INTO turns(episode_id, turn, action, summary, code,"
                      " status, score, speedup, time_us, baseline_us, result_json, feedback,"
                      " started_at, finished_at, prompt) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                      &s->replace_turn, err)) ||
        (rc = prepare(s, "SELECT count(*) FROM turns WHERE episode_id = ? AND turn < ?",
                      &s->count_before, err)) ||
        (rc = prepare(s, "DELETE FROM turns WHERE episode_id = ? AND turn > ?", &s->delete_after,
                      err)) ||
        (rc =
             prepare(s, "SELECT count(*) FROM turns WHERE episode_id = ?", &s->count_turns, err)) ||
        (rc = prepare(s, "UPDATE episodes SET finished_at = ?, returns_json = ? WHERE id = ?",
                      &s->finish_episode, err))) {
        pk_store_close(s);
        return rc;
    }
    *out = s;
    return PK_OK;
}

int pk_store_open_readonly(const char *path, pk_store **out, pk_error *err) {
    pk_store *s;
    int rc = open_common(path, SQLITE_OPEN_READONLY, &s, err);
    if (rc)
        return rc;
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(s->db, "SELECT version FROM schema_version", -1, &st, NULL) !=
        SQLITE_OK) {
        rc = pk_error_set(err, PK_ERR_INVALID, "'%s' is not a pkgym trajectory store (%s)", path,
                          sqlite3_errmsg(s->db));
        pk_store_close(s);
        return rc;
    }
    int version = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int(st, 0) : 0;
    sqlite3_finalize(st);
    if (version != 1 && version != PK_STORE_SCHEMA_VERSION) {
        pk_store_close(s);
        return pk_error_set(err, PK_ERR_UNSUPPORTED,
                            "trajectory store: '%s' has schema version %d, this build reads 1 and "
                            "%d",
                            path, version, PK_STORE_SCHEMA_VERSION);
    }
    s->version = version; /* a version-1 store is read as if migrated (store_reader.c) */
    *out = s;
    return PK_OK;
}

void pk_store_set_busy_timeout(pk_store *s, int ms) {
    if (s && s->db)
        sqlite3_busy_timeout(s->db, ms > 0 ? ms : 0);
}

void pk_store_close(pk_store *s) {
    if (!s)
        return;
    sqlite3_finalize(s->insert_episode);
    sqlite3_finalize(s->insert_turn);
    sqlite3_finalize(s->count_turns);
    sqlite3_finalize(s->finish_episode);
    sqlite3_finalize(s->replace_turn);
    sqlite3_finalize(s->count_before);
    sqlite3_finalize(s->delete_after);
    sqlite3_close(s->db);
    free(s);
}

static void bind_text(sqlite3_stmt *st, int i, const char *v) {
    if (v)
        sqlite3_bind_text(st, i, v, -1, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(st, i);
}

/* Runs a bound statement to completion (autocommit: committed on return) and resets it. */
static int run_stmt(pk_store *s, sqlite3_stmt *st, const char *what, pk_error *err) {
    int step = sqlite3_step(st);
    int rc = PK_OK;
    if (step != SQLITE_DONE) {
        /* A duplicate turn or an unknown episode is the caller's error, not I/O. */
        int ext = sqlite3_extended_errcode(s->db);
        int code = ext == SQLITE_CONSTRAINT_PRIMARYKEY || ext == SQLITE_CONSTRAINT_FOREIGNKEY
                       ? PK_ERR_INVALID
                       : PK_ERR_IO;
        rc = pk_error_set(err, code, "trajectory store: %s: %s", what, sqlite3_errmsg(s->db));
    }
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return rc;
}

static int writable(pk_store *s, pk_error *err) {
    if (!s || s->readonly)
        return pk_error_set(err, PK_ERR_INVALID, "trajectory store: not open for writing");
    return PK_OK;
}

int pk_store_begin_episode(pk_store *s, const pk_episode_row *e, pk_error *err) {
    int rc = writable(s, err);
    if (rc)
        return rc;
    if (!e->episode_id || !e->problem_id)
        return pk_error_set(err, PK_ERR_INVALID, "trajectory store: episode without id/problem");
    char *default_config = NULL;
    if (!e->config_json) {
        pk_reward_config c;
        pk_reward_config_default(&c);
        if (!(default_config = pk_reward_config_to_json(&c)))
            return pk_error_set(err, PK_ERR_NOMEM, "trajectory store: out of memory");
    }
    sqlite3_stmt *st = s->insert_episode;
    bind_text(st, 1, e->episode_id);
    bind_text(st, 2, e->problem_id);
    bind_text(st, 3, e->group);
    sqlite3_bind_int64(st, 4, e->seed);
    sqlite3_bind_int(st, 5, e->max_turns);
    bind_text(st, 6, e->config_json ? e->config_json : default_config);
    bind_text(st, 7, e->task_prompt);
    sqlite3_bind_double(st, 8, e->created_at > 0 ? e->created_at : pk_wall_time_s());
    rc = run_stmt(s, st, "begin episode", err);
    free(default_config);
    return rc;
}

static int check_turn(const char *episode_id, const pk_turn *t, pk_error *err) {
    if (!episode_id)
        return pk_error_set(err, PK_ERR_INVALID, "trajectory store: turn without episode id");
    if (t->turn < 1)
        return pk_error_set(err, PK_ERR_INVALID,
                            "trajectory store: turn %d of '%s': turns are numbered from 1", t->turn,
                            episode_id);
    /* infra_error is never a turn: the server answers it with an error and records nothing. */
    if ((unsigned)t->status >= PK_STATUS_COUNT || t->status == PK_STATUS_INFRA_ERROR ||
        !isfinite(t->score))
        return pk_error_set(err, PK_ERR_INVALID,
                            "trajectory store: turn %d of '%s': bad status %d or score %g", t->turn,
                            episode_id, (int)t->status, t->score);
    return PK_OK;
}

static void bind_turn(sqlite3_stmt *st, const char *episode_id, const pk_turn *t) {
    /* Denormalized measurements, for SQL queries; result_json stays the source of truth. */
    pk_turn_facts f;
    int have_facts =
        t->result_json && pk_turn_facts_from_result_json(t->result_json, &f, NULL) == 0;
    bind_text(st, 1, episode_id);
    sqlite3_bind_int(st, 2, t->turn);
    bind_text(st, 3, t->action);
    bind_text(st, 4, t->summary);
    bind_text(st, 5, t->code);
    bind_text(st, 6, pk_status_name(t->status));
    sqlite3_bind_double(st, 7, t->score);
    if (have_facts) {
        sqlite3_bind_double(st, 8, f.speedup);
        sqlite3_bind_double(st, 9, f.time_us);
        sqlite3_bind_double(st, 10, f.baseline_us);
    }
    bind_text(st, 11, t->result_json);
    bind_text(st, 12, t->feedback);
    sqlite3_bind_double(st, 13, t->started_at);
    sqlite3_bind_double(st, 14, t->finished_at);
    bind_text(st, 15, t->prompt);
}

int pk_store_add_turn(pk_store *s, const char *episode_id, const pk_turn *t, pk_error *err) {
    int rc = writable(s, err);
    if (!rc)
        rc = check_turn(episode_id, t, err);
    if (rc)
        return rc;
    bind_turn(s->insert_turn, episode_id, t);
    return run_stmt(s, s->insert_turn, "add turn", err);
}

/* The episode's stored turns (before `turn`, when st counts those); -1 when it fails. */
static int count_turns(sqlite3_stmt *st, const char *episode_id, int turn) {
    bind_text(st, 1, episode_id);
    if (turn > 0)
        sqlite3_bind_int(st, 2, turn);
    int n = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int(st, 0) : -1;
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return n;
}

int pk_store_put_turns(pk_store *s, const char *episode_id, const pk_turn *t, int n,
                       pk_error *err) {
    int rc = writable(s, err);
    if (rc)
        return rc;
    if (n < 1 || !t)
        return pk_error_set(err, PK_ERR_INVALID, "trajectory store: no turns to put");
    for (int i = 0; i < n; i++) {
        if ((rc = check_turn(episode_id, &t[i], err)))
            return rc;
        if (t[i].turn != t[0].turn + i)
            return pk_error_set(err, PK_ERR_INVALID,
                                "trajectory store: put_turns: one episode's consecutive turns");
    }
    if ((rc = exec(s, "BEGIN IMMEDIATE", err)))
        return rc;
    int before = count_turns(s->count_before, episode_id, t[0].turn);
    if (before != t[0].turn - 1) {
        rc = before < 0 ? db_error(s, err, "count turns")
                        : pk_error_set(err, PK_ERR_INVALID,
                                       "trajectory store: turn %d of '%s' would leave a gap (%d "
                                       "earlier turns stored)",
                                       t[0].turn, episode_id, before);
    }
    for (int i = 0; !rc && i < n; i++) {
        bind_turn(s->replace_turn, episode_id, &t[i]);
        rc = run_stmt(s, s->replace_turn, "put turn", err);
    }
    if (!rc) {
        sqlite3_stmt *st = s->delete_after;
        bind_text(st, 1, episode_id);
        sqlite3_bind_int(st, 2, t[n - 1].turn);
        rc = run_stmt(s, st, "drop later turns", err);
    }
    if (!rc)
        rc = exec(s, "COMMIT", err);
    if (rc)
        exec(s, "ROLLBACK", NULL);
    return rc;
}

int pk_store_finish_episode(pk_store *s, const char *episode_id, const double *returns, int n,
                            pk_error *err) {
    int rc = writable(s, err);
    if (rc)
        return rc;
    if (!episode_id || n < 0 || (n > 0 && !returns))
        return pk_error_set(err, PK_ERR_INVALID, "trajectory store: bad finish_episode arguments");
    int stored = count_turns(s->count_turns, episode_id, 0);
    if (stored != n)
        return pk_error_set(err, PK_ERR_INVALID,
                            "trajectory store: episode '%s' has %d stored turns, %d returns given",
                            episode_id, stored, n);
    for (int i = 0; i < n; i++)
        if (!isfinite(returns[i]))
            return pk_error_set(err, PK_ERR_INVALID, "trajectory store: return %d is not finite",
                                i);
    json_t *arr = json_array();
    for (int i = 0; arr && i < n; i++)
        json_array_append_new(arr, json_real(returns[i]));
    char *text = arr ? json_dumps(arr, JSON_COMPACT) : NULL;
    json_decref(arr);
    if (!text)
        return pk_error_set(err, PK_ERR_NOMEM, "trajectory store: out of memory");
    sqlite3_stmt *st = s->finish_episode;
    sqlite3_bind_double(st, 1, pk_wall_time_s());
    bind_text(st, 2, text);
    bind_text(st, 3, episode_id);
    rc = run_stmt(s, st, "finish episode", err);
    free(text);
    if (rc == PK_OK && sqlite3_changes(s->db) != 1)
        rc = pk_error_set(err, PK_ERR_NOT_FOUND, "trajectory store: no episode '%s'", episode_id);
    return rc;
}
