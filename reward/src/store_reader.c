/* Streams stored episodes with their turns, so export does not hold the whole store. */
#include "store_reader.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "store_internal.h"

static char *column_text(sqlite3_stmt *st, int i) {
    const unsigned char *t = sqlite3_column_text(st, i);
    return t ? strdup((const char *)t) : NULL;
}

static void free_episode(pk_stored_episode *e) {
    for (int i = 0; i < e->n_turns; i++) {
        pk_stored_turn *t = &e->turns[i];
        free(t->result_json);
        free(t->action);
        free(t->summary);
        free(t->code);
        free(t->feedback);
    }
    free(e->turns);
    free(e->online_returns);
    free(e->id);
    free(e->problem_id);
    free(e->group);
    free(e->config_json);
    free(e->task_prompt);
}

/* Parses the stored returns; ones that do not match the turns are flagged, not trusted. */
static int read_returns(pk_stored_episode *e, const char *json, pk_error *err) {
    json_t *arr = json_loads(json, 0, NULL);
    int rc = PK_OK;
    if (!json_is_array(arr) || (int)json_array_size(arr) != e->n_turns) {
        e->returns_malformed = 1;
    } else if (e->n_turns > 0 &&
               !(e->online_returns = calloc((size_t)e->n_turns, sizeof(double)))) {
        rc = pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    } else {
        for (int i = 0; i < e->n_turns; i++)
            e->online_returns[i] = json_number_value(json_array_get(arr, (size_t)i));
        e->finished = 1;
    }
    json_decref(arr);
    return rc;
}

static int load_turns(pk_store *s, sqlite3_stmt *st, pk_stored_episode *e, int with_text,
                      pk_error *err) {
    sqlite3_bind_text(st, 1, e->id, -1, SQLITE_STATIC);
    int cap = 0, step, rc = PK_OK;
    while ((step = sqlite3_step(st)) == SQLITE_ROW) {
        if (e->n_turns == cap) {
            cap = cap ? 2 * cap : 8;
            pk_stored_turn *grown = realloc(e->turns, sizeof *grown * (size_t)cap);
            if (!grown) {
                rc = pk_error_set(err, PK_ERR_NOMEM, "out of memory");
                break;
            }
            e->turns = grown;
        }
        pk_stored_turn *t = &e->turns[e->n_turns++];
        memset(t, 0, sizeof *t);
        t->turn = sqlite3_column_int(st, 0);
        const char *status = (const char *)sqlite3_column_text(st, 1);
        int code = pk_status_from_name(status);
        if (code < 0) {
            rc = pk_error_set(err, PK_ERR_INVALID, "episode '%s' turn %d: unknown status '%s'",
                              e->id, t->turn, status ? status : "(null)");
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
        }
    }
    if (rc == PK_OK && step != SQLITE_DONE)
        rc =
            pk_error_set(err, PK_ERR_IO, "reading turns of '%s': %s", e->id, sqlite3_errmsg(s->db));
    sqlite3_reset(st);
    return rc;
}

int pk_store_each_episode(pk_store *s, int with_text, pk_episode_fn fn, void *ctx, pk_error *err) {
    sqlite3_stmt *eps = NULL, *turns = NULL;
    int rc = PK_OK, step = SQLITE_DONE;
    if (sqlite3_prepare_v2(s->db,
                           "SELECT id, problem_id, group_id, seed, max_turns, config_json,"
                           " task_prompt, created_at, finished_at, returns_json FROM episodes"
                           " ORDER BY created_at, id",
                           -1, &eps, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(s->db,
                           "SELECT turn, status, score, result_json, started_at, finished_at,"
                           " action, summary, code, feedback FROM turns WHERE episode_id = ?"
                           " ORDER BY turn",
                           -1, &turns, NULL) != SQLITE_OK) {
        rc = pk_error_set(err, PK_ERR_IO, "trajectory store: %s", sqlite3_errmsg(s->db));
        goto out;
    }
    /* One read transaction: a consistent snapshot even while a server keeps writing. */
    sqlite3_exec(s->db, "BEGIN", NULL, NULL, NULL);
    while (rc == PK_OK && (step = sqlite3_step(eps)) == SQLITE_ROW) {
        pk_stored_episode e = {0};
        e.id = column_text(eps, 0);
        e.problem_id = column_text(eps, 1);
        e.group = column_text(eps, 2);
        e.seed = sqlite3_column_int64(eps, 3);
        e.max_turns = sqlite3_column_int(eps, 4);
        e.config_json = column_text(eps, 5);
        e.task_prompt = column_text(eps, 6);
        e.created_at = sqlite3_column_double(eps, 7);
        e.finished_at = sqlite3_column_double(eps, 8);
        const char *returns = (const char *)sqlite3_column_text(eps, 9);
        if (!e.id || !e.problem_id)
            rc = pk_error_set(err, PK_ERR_INVALID, "trajectory store: episode without id");
        if (rc == PK_OK)
            rc = load_turns(s, turns, &e, with_text, err);
        if (rc == PK_OK && returns)
            rc = read_returns(&e, returns, err);
        if (rc == PK_OK)
            rc = fn(&e, ctx, err);
        free_episode(&e);
    }
    if (rc == PK_OK && step != SQLITE_DONE)
        rc = pk_error_set(err, PK_ERR_IO, "trajectory store: %s", sqlite3_errmsg(s->db));
    sqlite3_exec(s->db, "COMMIT", NULL, NULL, NULL);
out:
    sqlite3_finalize(eps);
    sqlite3_finalize(turns);
    return rc;
}
