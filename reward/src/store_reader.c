/* Reads stored episodes with their turns: streamed, so export does not hold the whole store
 * (pk_store_each_episode), or one by id (pk_store_read_episode, the server's `trajectory`). */
#include "store_reader.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "store_internal.h"

static char *column_text(sqlite3_stmt *st, int i) {
    const unsigned char *t = sqlite3_column_text(st, i);
    return t ? strdup((const char *)t) : NULL;
}

/* Frees what e holds, not e itself. */
static void clear_episode(pk_store_episode *e) {
    for (int i = 0; i < e->n_turns; i++)
        pk_turn_free(&e->turns[i]);
    free(e->turns);
    free(e->returns);
    free((char *)e->row.episode_id);
    free((char *)e->row.problem_id);
    free((char *)e->row.group);
    free((char *)e->row.config_json);
    free((char *)e->row.task_prompt);
    memset(e, 0, sizeof *e);
}

/* Parses the stored returns; ones that do not match the turns are flagged, not trusted. */
static int read_returns(pk_store_episode *e, const char *json, pk_error *err) {
    json_t *arr = json_loads(json, 0, NULL);
    int rc = PK_OK;
    if (!json_is_array(arr) || (int)json_array_size(arr) != e->n_turns) {
        e->returns_malformed = 1;
    } else if (e->n_turns > 0 && !(e->returns = calloc((size_t)e->n_turns, sizeof(double)))) {
        rc = pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    } else {
        for (int i = 0; i < e->n_turns; i++)
            e->returns[i] = json_number_value(json_array_get(arr, (size_t)i));
        e->finished = 1;
    }
    json_decref(arr);
    return rc;
}

static int load_turns(pk_store *s, sqlite3_stmt *st, pk_store_episode *e, int with_text,
                      pk_error *err) {
    const char *id = e->row.episode_id;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    int cap = 0, step, rc = PK_OK;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        if (e->n_turns == cap) {
            cap = cap ? 2 * cap : 8;
            pk_turn *grown = realloc(e->turns, sizeof *grown * (size_t)cap);
            if (!grown) {
                rc = pk_error_set(err, PK_ERR_NOMEM, "out of memory");
                break;
            }
            e->turns = grown;
        }
        pk_turn *t = &e->turns[e->n_turns++];
        memset(t, 0, sizeof *t);
        t->turn = sqlite3_column_int(st, 0);
        const char *status = (const char *)sqlite3_column_text(st, 1);
        int code = pk_status_from_name(status);
        if (code < 0) {
            rc = pk_error_set(err, PK_ERR_INVALID, "episode '%s' turn %d: unknown status '%s'", id,
                              t->turn, status ? status : "(null)");
            break;
        }
        t->status = (pk_status)code;
        t->score = sqlite3_column_double(st, 2);
        t->result_json = column_text(st, 3);
        t->started_at = sqlite3_column_double(st, 4);
        t->finished_at = sqlite3_column_double(st, 5);
        if (with_text) {
            t->action = column_text(st, 6);
            t->summary = column_text(st, 7);
            t->code = column_text(st, 8);
            t->feedback = column_text(st, 9);
            t->prompt = column_text(st, 10);
        }
    }
    if (rc == PK_OK && step != SQLITE_DONE)
        rc = pk_error_set(err, PK_ERR_IO, "reading turns of '%s': %s", id, sqlite3_errmsg(s->db));
    sqlite3_reset(st);
    return rc;
}

#define EPISODE_SELECT                                                                             \
    "SELECT id, problem_id, group_id, seed, max_turns, config_json, task_prompt, created_at,"      \
    " finished_at, returns_json FROM episodes"
/* Version 2; a version-1 store (opened read-only, so not migrated) is read as if migrated:
 * its 0-based turns shifted to 1-based, no prompts. */
#define TURNS_SELECT                                                                               \
    "SELECT turn, status, score, result_json, started_at, finished_at, action, summary, code,"     \
    " feedback, prompt FROM turns WHERE episode_id = ? ORDER BY turn"
#define TURNS_SELECT_V1                                                                            \
    "SELECT turn + 1, status, score, result_json, started_at, finished_at, action, summary,"       \
    " code, feedback, NULL FROM turns WHERE episode_id = ? ORDER BY turn"

static int prepare_both(pk_store *s, const char *episodes_sql, sqlite3_stmt **eps,
                        sqlite3_stmt **turns, pk_error *err) {
    *eps = *turns = NULL;
    const char *turns_sql = s->version == 1 ? TURNS_SELECT_V1 : TURNS_SELECT;
    if (sqlite3_prepare_v2(s->db, episodes_sql, -1, eps, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(s->db, turns_sql, -1, turns, NULL) != SQLITE_OK)
        return pk_error_set(err, PK_ERR_IO, "trajectory store: %s", sqlite3_errmsg(s->db));
    return PK_OK;
}

/* " WHERE ..." for the filter (values bound in order by bind_filter), or "". */
static int filter_sql(const pk_store_filter *f, pk_strbuf *sql) {
    int rc = PK_OK, clauses = 0;
    struct {
        const char *column;
        int n;
    } lists[] = {{"problem_id", f ? f->n_problems : 0},
                 {"group_id", f ? f->n_groups : 0},
                 {"id", f ? f->n_episodes : 0}};
    for (size_t l = 0; l < sizeof lists / sizeof *lists; l++) {
        if (lists[l].n <= 0)
            continue;
        rc = rc ? rc
                : pk_strbuf_printf(sql, "%s%s IN (", clauses++ ? " AND " : " WHERE ",
                                   lists[l].column);
        for (int i = 0; i < lists[l].n; i++)
            rc = rc ? rc : pk_strbuf_puts(sql, i ? ",?" : "?");
        rc = rc ? rc : pk_strbuf_puts(sql, ")");
    }
    if (f && f->since > 0)
        rc = rc ? rc : pk_strbuf_printf(sql, "%screated_at >= ?", clauses++ ? " AND " : " WHERE ");
    return rc;
}

static void bind_filter(sqlite3_stmt *st, const pk_store_filter *f) {
    if (!f)
        return;
    int k = 1;
    for (int i = 0; i < f->n_problems; i++)
        sqlite3_bind_text(st, k++, f->problems[i], -1, SQLITE_STATIC);
    for (int i = 0; i < f->n_groups; i++)
        sqlite3_bind_text(st, k++, f->groups[i], -1, SQLITE_STATIC);
    for (int i = 0; i < f->n_episodes; i++)
        sqlite3_bind_text(st, k++, f->episodes[i], -1, SQLITE_STATIC);
    if (f->since > 0)
        sqlite3_bind_double(st, k++, f->since);
}

/* Reads the episode at eps's current row, with its turns and returns, into e (zeroed). */
static int read_episode(pk_store *s, sqlite3_stmt *eps, sqlite3_stmt *turns, int with_text,
                        pk_store_episode *e, pk_error *err) {
    e->row = (pk_episode_row){.episode_id = column_text(eps, 0),
                              .problem_id = column_text(eps, 1),
                              .group = column_text(eps, 2),
                              .seed = sqlite3_column_int64(eps, 3),
                              .max_turns = sqlite3_column_int(eps, 4),
                              .config_json = column_text(eps, 5),
                              .task_prompt = column_text(eps, 6),
                              .created_at = sqlite3_column_double(eps, 7)};
    e->finished_at = sqlite3_column_double(eps, 8);
    const char *returns = (const char *)sqlite3_column_text(eps, 9);
    if (!e->row.episode_id || !e->row.problem_id)
        return pk_error_set(err, PK_ERR_INVALID, "trajectory store: episode without id");
    int rc = load_turns(s, turns, e, with_text, err);
    if (rc == PK_OK && returns)
        rc = read_returns(e, returns, err);
    return rc;
}

int pk_store_each_episode(pk_store *s, int with_text, const pk_store_filter *filter,
                          pk_episode_fn fn, void *ctx, pk_error *err) {
    sqlite3_stmt *eps = NULL, *turns = NULL;
    int step = SQLITE_DONE;
    pk_strbuf sql = {0};
    int rc = pk_strbuf_puts(&sql, EPISODE_SELECT);
    rc = rc ? rc : filter_sql(filter, &sql);
    rc = rc ? rc : pk_strbuf_puts(&sql, " ORDER BY created_at, id");
    rc = rc ? pk_error_set(err, PK_ERR_NOMEM, "out of memory")
            : prepare_both(s, sql.data, &eps, &turns, err);
    pk_strbuf_free(&sql);
    if (rc)
        goto out;
    bind_filter(eps, filter);
    /* One read transaction: a consistent snapshot even while a server keeps writing. */
    sqlite3_exec(s->db, "BEGIN", NULL, NULL, NULL);
    while (rc == PK_OK && (step = sqlite3_step(eps)) == SQLITE_ROW) {
        pk_store_episode e = {0};
        rc = read_episode(s, eps, turns, with_text, &e, err);
        if (rc == PK_OK)
            rc = fn(&e, ctx, err);
        clear_episode(&e);
    }
    if (rc == PK_OK && step != SQLITE_DONE)
        rc = pk_error_set(err, PK_ERR_IO, "trajectory store: %s", sqlite3_errmsg(s->db));
    sqlite3_reset(eps);
    sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL);
out:
    sqlite3_finalize(eps);
    sqlite3_finalize(turns);
    return rc;
}

void pk_store_episode_free(pk_store_episode *e) {
    if (!e)
        return;
    clear_episode(e);
    free(e);
}

int pk_store_read_episode(pk_store *s, const char *episode_id, pk_store_episode **out,
                          pk_error *err) {
    *out = NULL;
    if (!s || !episode_id)
        return pk_error_set(err, PK_ERR_INVALID, "trajectory store: no store or episode id");
    sqlite3_stmt *eps, *turns;
    int rc = prepare_both(s, EPISODE_SELECT " WHERE id = ?", &eps, &turns, err);
    if (rc)
        goto out;
    /* The episode row and its turns from one snapshot, even while the writer commits. */
    if (sqlite3_exec(s->db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK) {
        rc = pk_error_set(err, PK_ERR_IO, "trajectory store: %s", sqlite3_errmsg(s->db));
        goto out;
    }
    sqlite3_bind_text(eps, 1, episode_id, -1, SQLITE_STATIC);
    int step = sqlite3_step(eps);
    if (step == SQLITE_ROW) {
        pk_store_episode *e = calloc(1, sizeof *e);
        rc = e ? read_episode(s, eps, turns, 1, e, err)
               : pk_error_set(err, PK_ERR_NOMEM, "trajectory store: out of memory");
        if (rc == PK_OK && e->returns_malformed)
            rc = pk_error_set(err, PK_ERR_INVALID,
                              "trajectory store: episode '%s': its stored returns do not match "
                              "its %d turn(s)",
                              episode_id, e->n_turns);
        if (rc == PK_OK)
            *out = e;
        else
            pk_store_episode_free(e);
    } else if (step != SQLITE_DONE) {
        rc = pk_error_set(err, PK_ERR_IO, "trajectory store: reading episode '%s': %s", episode_id,
                          sqlite3_errmsg(s->db));
    }
    sqlite3_reset(eps);
    /* Ends the read transaction: a snapshot left open would keep the WAL from being
     * checkpointed. */
    if (sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
        sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
out:
    sqlite3_finalize(eps);
    sqlite3_finalize(turns);
    return rc;
}
