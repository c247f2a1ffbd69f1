/* Server restart (episode_restore.h). This is the one place that reads the trajectory store's
 * layout for the restore: the candidate query below (episodes, turns) and pk_store_read_episode
 * for the turns themselves; a change of the store's schema is adapted here. */
#include "episode_restore.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "episode_examples.h"
#include "episode_options.h"
#include "episode_rules.h"
#include "observation.h"
#include "server_state.h"
#include "store_then_reply.h"

/* Unfinished episodes, most recently active first, with their last activity: all of them, so
 * that the journal keeps the `closed` rows of those a later restart could still consider. */
static const char *const candidates_sql =
    "SELECT e.id, MAX(e.created_at, COALESCE((SELECT MAX(t.finished_at) FROM turns t"
    " WHERE t.episode_id = e.id), 0)) AS last FROM episodes e WHERE e.finished_at IS NULL"
    " ORDER BY last DESC";

typedef struct candidates {
    char **ids;
    double *last;
    int n, cap;
} candidates;

static void free_candidates(candidates *c) {
    for (int i = 0; i < c->n; i++)
        free(c->ids[i]);
    free(c->ids);
    free(c->last);
}

static int list_candidates(const char *db_path, candidates *c, pk_error *err) {
    memset(c, 0, sizeof *c);
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_open_v2(db_path, &db, SQLITE_OPEN_READONLY, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_busy_timeout(db, 5000);
        rc = sqlite3_prepare_v2(db, candidates_sql, -1, &st, NULL);
    }
    while (rc == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW) {
        double last = sqlite3_column_double(st, 1);
        const char *id = (const char *)sqlite3_column_text(st, 0);
        if (c->n == c->cap) {
            int cap = c->cap ? 2 * c->cap : 64;
            char **ids = realloc(c->ids, (size_t)cap * sizeof *ids);
            double *lasts = ids ? realloc(c->last, (size_t)cap * sizeof *lasts) : NULL;
            if (ids)
                c->ids = ids;
            if (!ids || !lasts) {
                rc = SQLITE_NOMEM;
                break;
            }
            c->last = lasts;
            c->cap = cap;
        }
        if (!id || !(c->ids[c->n] = strdup(id))) {
            rc = SQLITE_NOMEM;
            break;
        }
        c->last[c->n++] = last;
    }
    if (rc != SQLITE_OK)
        pk_error_set(err, rc == SQLITE_NOMEM ? PK_ERR_NOMEM : PK_ERR_IO, "restore: reading %s: %s",
                     db_path, db ? sqlite3_errmsg(db) : "cannot open");
    sqlite3_finalize(st);
    sqlite3_close(db);
    if (rc != SQLITE_OK)
        free_candidates(c);
    return rc == SQLITE_OK ? PK_OK : PK_ERR_IO;
}

/* The reset options that give back the stored settings: null means "the default" there. */
static json_t *options_of(const json_t *settings) {
    json_t *o = json_object();
    const char *keys[] = {"reward", "stop_on_correct", "examples", "profile"};
    for (size_t i = 0; o && i < sizeof keys / sizeof *keys; i++) {
        json_t *v = json_object_get(settings, keys[i]);
        if (v)
            json_object_set(o, keys[i], v);
    }
    /* The stored feedback settings name hooks by their registered names; `hook_registry` only
     * records what those names stood for and is no option (the current registry applies). */
    json_t *fb = json_object_get(settings, "feedback");
    if (o && json_is_object(fb)) {
        json_t *copy = json_deep_copy(fb);
        json_object_del(copy, "hook_registry");
        json_object_set_new(o, "feedback", copy);
    }
    json_t *check = json_object_get(settings, "check");
    if (o && json_is_object(check)) {
        json_t *c = json_object();
        const char *k;
        json_t *v;
        json_object_foreach(check, k, v) if (!json_is_null(v)) json_object_set(c, k, v);
        json_object_set_new(o, "check", c);
    }
    return o;
}

static char *dup_or_null(const char *t) {
    return t ? strdup(t) : NULL;
}

/* The stored turns up to the first gap (numbered from 1): a store written before the server
 * sent unstored turns again may have one after a full disk, and the episode is restored as far
 * as it was stored (issue 27, finding 5); its next turn replaces the rows after the gap. */
static int copy_turns(pk_episode *e, const pk_store_episode *st) {
    for (int i = 0; i < st->n_turns && st->turns[i].turn == i + 1; i++) {
        pk_turn t;
        if (pk_turn_copy(&t, &st->turns[i]))
            return -1;
        if (pk_episode_add_turn(e, &t)) {
            pk_turn_free(&t);
            return -1;
        }
    }
    e->n_stored = e->n_turns;
    return 0;
}

/* Rebuilds one episode; NULL (and why) when it cannot be. */
static pk_episode *rebuild(pk_server *s, const pk_store_episode *st, char *why, size_t cap) {
    const pk_problem *p = pk_problem_set_find(s->problems, st->row.problem_id);
    if (!p) {
        snprintf(why, cap, "problem '%s' is not loaded", st->row.problem_id);
        return NULL;
    }
    json_t *settings = st->row.config_json ? json_loads(st->row.config_json, 0, NULL) : NULL;
    pk_episode *e = calloc(1, sizeof *e);
    json_t *options = settings ? options_of(settings) : NULL;
    if (e)
        e->problem = p; /* the feedback settings need it */
    pk_error err;
    pk_error_clear(&err);
    int rc = !e || !options
                 ? PK_ERR_INVALID
                 /* profiling_on: a restarted server without profiling still restores the
                  * episode; its budget of 0 then skips every profile (budget) */
                 : pk_episode_apply_options(e, options, &s->reward_default, s->feedback_default,
                                            s->hooks, s->opts.templates_dir, 1, &err);
    json_decref(options);
    if (rc) {
        snprintf(why, cap, "its stored settings no longer apply: %s",
                 err.message[0] ? err.message : "not a JSON object");
        json_decref(settings);
        pk_episode_free(e);
        return NULL;
    }
    snprintf(e->id, sizeof e->id, "%s", st->row.episode_id);
    pk_episode_examples_bind(e, s->archive);
    e->max_turns = st->row.max_turns;
    e->group = dup_or_null(st->row.group);
    json_t *seed = json_object_get(settings, "seed");
    const char *seed_source = json_string_value(json_object_get(settings, "seed_source"));
    e->seed = json_is_integer(seed) ? json_integer_value(seed) : 0;
    e->seed_drawn = seed_source && strcmp(seed_source, "drawn") == 0;
    json_decref(e->settings);
    e->settings = settings; /* exactly what reset returned */
    if (copy_turns(e, st)) {
        snprintf(why, cap, "out of memory copying its turns");
        pk_episode_free(e);
        return NULL;
    }
    if (e->n_turns < st->n_turns)
        fprintf(stderr,
                "pkgym serve: restore: episode %s: turn %d is missing from the store; restored "
                "with turns 1..%d\n",
                e->id, e->n_turns + 1, e->n_turns);
    /* Its later turns keep to the GPU model of its first measured one. */
    for (int i = 0; i < e->n_turns && !e->gpu_model[0]; i++) {
        json_t *r = e->turns[i].result_json ? json_loads(e->turns[i].result_json, 0, NULL) : NULL;
        const char *g = json_string_value(json_object_get(r, "gpu_name"));
        if (g && *g)
            snprintf(e->gpu_model, sizeof e->gpu_model, "%s", g);
        json_decref(r);
    }
    e->prompt = e->n_turns
                    ? pk_episode_next_prompt(e)
                    : pk_episode_examples_prompt(e,
                                                 pk_utf8_sanitize_take(pk_summarizer_first_prompt(
                                                     e->summarizer, pk_problem_prompt(p))),
                                                 1);
    if (!e->prompt) {
        snprintf(why, cap, "out of memory building its prompt");
        pk_episode_free(e);
        return NULL;
    }
    return e;
}

/* The last turn ended the episode but the crash came before its returns were stored: finish
 * it now (in memory and in the store). */
static void finish_if_over(pk_server *s, pk_episode *e) {
    if (!pk_episode_ended(e, NULL, NULL))
        return;
    pk_episode_finish(e);
    pk_store_job *job = calloc(1, sizeof *job);
    if (!job || !e->returns || !(job->episode_id = strdup(e->id)) ||
        !(job->returns = malloc((size_t)e->n_turns * sizeof *job->returns))) {
        pk_store_job_free(job);
        return;
    }
    memcpy(job->returns, e->returns, (size_t)e->n_turns * sizeof *job->returns);
    job->n_returns = e->n_turns;
    pk_server_store_then_reply(s, job, NULL, NULL, 0, NULL, NULL, e);
}

int pk_episode_restore(pk_server *s, pk_error *err) {
    char *db = pk_path_join(s->opts.data_dir, "trajectories.sqlite");
    if (!db)
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    candidates c;
    double since = pk_wall_time_s() - s->opts.episode_idle_s;
    int rc = list_candidates(db, &c, err);
    free(db);
    if (rc)
        return rc;
    int restored = 0, interrupted = 0, closed = 0, skipped = 0, finished = 0, expired = 0;
    for (int i = 0; i < c.n && (int)s->episodes.count < s->opts.max_episodes; i++) {
        if (pk_journal_is_closed(s->journal, c.ids[i])) {
            closed++;
            continue;
        }
        if (c.last[i] < since) {
            /* Idle past the limit: it expired, as it would have in a running server. Recorded
             * as closed, so a later restart with a longer limit does not bring it back. */
            pk_journal_closed(s->journal, c.ids[i]);
            expired++;
            continue;
        }
        pk_store_episode *st = NULL;
        pk_error rerr;
        char why[600];
        pk_episode *e = NULL;
        if (pk_store_read_episode(s->reader, c.ids[i], &st, &rerr) != PK_OK || !st)
            snprintf(why, sizeof why, "%s", st ? rerr.message : "not found");
        else
            e = rebuild(s, st, why, sizeof why);
        pk_store_episode_free(st);
        if (!e) {
            fprintf(stderr, "pkgym serve: restore: episode %s left out: %s\n", c.ids[i], why);
            skipped++;
            continue;
        }
        pk_journal_step step = pk_journal_step_of(s->journal, e->id);
        if (step.turn == e->n_turns) { /* its turn never reached the store */
            e->interrupted_turn = step.turn + 1;
            e->interrupted_at = step.started_at;
            interrupted++;
        }
        e->last_active_ms = pk_now_ms();
        /* Its client's connection died with the last run: it belongs to nobody (a client
         * that names it claims it) and expires after --episode-orphan-s unless claimed
         * (issue 27, finding 3). What the store has stays there (finding 4). */
        pk_client_entry *nobody = pk_client_get(&s->clients, PK_CLIENT_RESTORED);
        if (nobody && nobody->gone_ms <= 0)
            nobody->gone_ms = pk_now_ms();
        pk_episode_set_owner(e, nobody);
        pk_episode_trim_stored(e);
        pk_episode_recharge(e);
        pk_episode_insert(&s->episodes, e);
        finish_if_over(s, e);
        finished += e->done;
        restored++;
    }
    /* Issue 27, finding 6: the journal keeps the entries of every unfinished episode, not
     * only of those restored now, so a closed or expired one never comes back. */
    pk_journal_keep_only(s->journal, (const char *const *)c.ids, c.n);
    if (restored || skipped || closed || expired)
        fprintf(stderr,
                "pkgym serve: restored %d open episode(s) from the store (%d with a step "
                "interrupted by the restart, %d ended by their last stored turn); %d closed, "
                "%d expired now, %d left out\n",
                restored, interrupted, finished, closed, expired, skipped);
    s->n.episodes_restored = (uint64_t)restored;
    free_candidates(&c);
    return PK_OK;
}
