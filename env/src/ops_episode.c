/* Episode lifecycle ops: reset, close, trajectory. */
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "call_lookup.h"
#include "episode_examples.h"
#include "episode_options.h"
#include "episode_rules.h"
#include "observation.h"
#include "ops.h"
#include "pk_client.h"
#include "problem_json.h"
#include "store_then_reply.h"

#define DEFAULT_MAX_TURNS 4
#define MAX_GROUP_LEN 256
#define DRAWN_SEED_MASK ((1ull << 53) - 1) /* exact in every JSON reader's doubles */

/* A seed for an episode the client did not seed: drawn, then stored and reported like a
 * client's, so that every episode can be replayed. */
static int draw_seed(long long *seed) {
    uint64_t v;
    if (getrandom(&v, sizeof v, 0) != sizeof v)
        return -1;
    *seed = (long long)(v & DRAWN_SEED_MASK);
    return 0;
}

/* Reads reset's scalar fields into e; replies and returns -1 on a bad one. */
static int read_reset_fields(pk_call *c, pk_episode *e, json_t **options) {
    pk_error err;
    long long v;
    int present, has_seed;
    *options = NULL;
    if (pk_request_int(c->req, "seed", &e->seed, &has_seed, &err) ||
        pk_request_int(c->req, "max_turns", &v, &present, &err) ||
        pk_request_str(c->req, "group", 0, MAX_GROUP_LEN, &e->group, &err)) {
        pk_call_error(c, PK_E_BAD_REQUEST, "%s", err.message);
        return -1;
    }
    if (has_seed && e->seed < 0) {
        /* -1 once meant "none" in the store: a client's seed is never negative. */
        pk_call_error(c, PK_E_BAD_REQUEST,
                      "field 'seed' must be in [0, 2^63 - 1]; leave it out (or nil) and the server "
                      "draws one, reported in info.settings.seed");
        return -1;
    }
    if (!has_seed) {
        if (draw_seed(&e->seed)) {
            pk_call_error(c, PK_E_INTERNAL, "cannot draw a seed (getrandom failed)");
            return -1;
        }
        e->seed_drawn = 1;
    }
    e->max_turns = DEFAULT_MAX_TURNS;
    if (present) {
        if (v < 1 || v > c->s->opts.max_turns_limit) {
            pk_call_error(c, PK_E_BAD_REQUEST,
                          "field 'max_turns' must be in [1, %d] (limits.max_turns)",
                          c->s->opts.max_turns_limit);
            return -1;
        }
        e->max_turns = (int)v;
    }
    const msgpack_object *o = pk_request_field(c->req, "options");
    if (o && o->type != MSGPACK_OBJECT_NIL) {
        if (o->type != MSGPACK_OBJECT_MAP) {
            pk_call_error(c, PK_E_BAD_REQUEST, "field 'options' must be a map");
            return -1;
        }
        if (pk_json_from_msgpack(o, "options", PK_MAX_NESTING, options, &err)) {
            pk_call_error(c, PK_E_BAD_REQUEST, "%s", err.message);
            return -1;
        }
    }
    return 0;
}

static char *dup_or_null(const char *text) {
    return text ? strdup(text) : NULL;
}

/* The store job of a new episode (strings copied). */
static pk_store_job *begin_job(const pk_episode *e) {
    pk_store_job *j = calloc(1, sizeof *j);
    if (!j)
        return NULL;
    j->has_begin = 1;
    j->begin = (pk_episode_row){
        .episode_id = strdup(e->id),
        .problem_id = strdup(pk_problem_id(e->problem)),
        .group = dup_or_null(e->group),
        .seed = e->seed,
        .max_turns = e->max_turns,
        .config_json = json_dumps(e->settings, JSON_COMPACT),
        .created_at = pk_wall_time_s(),
        .task_prompt = strdup(pk_problem_prompt(e->problem)),
    };
    if (!j->begin.episode_id || !j->begin.problem_id || (e->group && !j->begin.group) ||
        !j->begin.config_json || !j->begin.task_prompt) {
        pk_store_job_free(j);
        return NULL;
    }
    return j;
}

void pk_op_reset(pk_call *c) {
    pk_server *s = c->s;
    const pk_problem *p = pk_call_problem(c);
    if (!p)
        return;
    if ((int)s->episodes.count + s->resets_pending >= s->opts.max_episodes) {
        pk_call_error(c, PK_E_OVERLOADED,
                      "%zu episodes are open, the limit (limits.max_episodes); close some",
                      s->episodes.count + (size_t)s->resets_pending);
        return;
    }
    pk_client_entry *client = pk_call_client(c);
    if (!client)
        return;
    if (client->bytes >= s->opts.max_client_bytes || s->clients.bytes >= s->opts.max_held_bytes) {
        char who[32];
        pk_client_short_id(client, who, sizeof who);
        pk_call_error(c, PK_E_OVERLOADED,
                      client->bytes >= s->opts.max_client_bytes
                          ? "client %s holds %zu bytes in its episodes, the limit per client "
                            "(limits.max_client_bytes); close some"
                          : "client %s: open episodes hold %zu bytes in all, the server's limit "
                            "(limits.max_held_bytes); try later",
                      who,
                      client->bytes >= s->opts.max_client_bytes ? client->bytes : s->clients.bytes);
        pk_client_drop_if_unused(client);
        return;
    }
    if (client->episodes >= s->opts.max_client_episodes) {
        char who[32];
        pk_client_short_id(client, who, sizeof who);
        pk_call_error(c, PK_E_OVERLOADED,
                      "client %s has %d episodes open, the limit per client "
                      "(limits.max_client_episodes); close some",
                      who, client->episodes);
        return;
    }
    pk_episode *e = calloc(1, sizeof *e);
    if (!e) {
        pk_call_error(c, PK_E_INTERNAL, "out of memory");
        pk_client_drop_if_unused(client);
        return;
    }
    e->problem = p;
    e->owner = client; /* released by pk_episode_free, on every path */
    client->episodes++;
    json_t *options = NULL;
    pk_error err;
    pk_error_clear(&err);
    if (read_reset_fields(c, e, &options)) {
        pk_episode_free(e);
        return;
    }
    int rc = pk_episode_apply_options(e, options, &s->reward_default, s->feedback_default, s->hooks,
                                      s->opts.templates_dir, s->opts.profile_per_minute > 0, &err);
    json_decref(options);
    if (rc) {
        pk_call_error(c, rc == PK_ERR_INVALID ? PK_E_BAD_REQUEST : PK_E_INTERNAL, "%s",
                      err.message);
        pk_episode_free(e);
        return;
    }
    /* Refuse now, not at the first step, an episode this server cannot evaluate. */
    int world = e->eval.world_size > 0 ? e->eval.world_size : pk_problem_world_size(p);
    if (pk_problem_needs_gpu(p) && s->sched_gpus >= 0 && world > s->sched_gpus) {
        pk_call_error(c, PK_E_BAD_REQUEST,
                      "problem '%s' needs %d GPUs%s; this server has %d "
                      "(hello.gpu_slots)",
                      pk_problem_id(p), world,
                      e->eval.world_size > 0 ? " at options.check.world_size" : "", s->sched_gpus);
        pk_episode_free(e);
        return;
    }
    json_object_set_new(e->settings, "max_turns", json_integer(e->max_turns));
    json_object_set_new(e->settings, "seed", json_integer(e->seed));
    json_object_set_new(e->settings, "seed_source",
                        json_string(e->seed_drawn ? "drawn" : "client"));
    json_object_set_new(e->settings, "group", e->group ? json_string(e->group) : json_null());
    pk_episode_examples_bind(e, s->archive);
    /* The id first: the archive records which examples each episode's prompts used. */
    int id_ok = pk_episode_new_id(e->id) == 0;
    e->prompt = id_ok ? pk_episode_examples_prompt(e,
                                                   pk_utf8_sanitize_take(pk_summarizer_first_prompt(
                                                       e->summarizer, pk_problem_prompt(p))),
                                                   1)
                      : NULL;
    if (!e->prompt || !id_ok) {
        pk_call_error(c, PK_E_INTERNAL, "cannot create the episode (memory or randomness)");
        pk_episode_free(e);
        return;
    }
    json_t *messages = pk_episode_messages_json(e);
    json_t *body = messages ? json_pack("{s:s, s:{s:s, s:s, s:i, s:o}, s:{s:o, s:O}}", "episode",
                                        e->id, "observation", "prompt", e->prompt, "feedback", "",
                                        "turn", 0, "messages", messages, "info", "problem",
                                        pk_problem_detail_json(p), "settings", e->settings)
                            : NULL;
    json_t *examples = body ? pk_episode_examples_info(e) : NULL;
    if (examples) /* only when asked for: which entries this prompt used */
        json_object_set_new(json_object_get(body, "info"), "examples", examples);
    pk_store_job *job = begin_job(e);
    char *id_raw = NULL;
    size_t id_len = 0;
    if (!body || !job || pk_request_copy_id(c->req, &id_raw, &id_len, &err)) {
        json_decref(body);
        pk_store_job_free(job);
        pk_episode_free(e);
        pk_call_error(c, PK_E_INTERNAL, "out of memory");
        return;
    }
    /* The reply goes out once the episode is in the store (and then in the table). */
    pk_server_store_then_reply(s, job, &c->env, id_raw, id_len, body, e, NULL);
}

/* Its trajectory stays readable (`trajectory` reads the store). A close after the last step
 * reply is safe: step replies only after its turn is committed. A close before that (a step
 * in flight, or a turn still queued in the store writer) keeps the episode in memory until
 * the turn is committed (pk_server_release_if_closed), so no turn is ever missing. */
void pk_op_close(pk_call *c) {
    pk_episode *e = pk_call_episode(c);
    if (!e)
        return;
    json_t *body =
        json_pack("{s:s, s:i, s:b}", "episode", e->id, "turns", e->n_turns, "done", e->done);
    /* A step in flight still gets its reply. A restart does not reopen it. */
    e->closed = 1;
    pk_journal_closed(c->s->journal, e->id);
    pk_server_store_backlog(c->s, e); /* a last try for turns a full disk left out */
    pk_server_release_if_closed(c->s, e);
    pk_call_ok(c, body);
}

/* One turn of the reply: the same fields for a turn in memory and one read from the store.
 * t->turn is 1-based in both. */
static json_t *turn_json(const pk_turn *t) {
    json_t *result = t->result_json ? json_loads(t->result_json, 0, NULL) : NULL;
    return json_pack("{s:i, s:s?, s:s, s:s?, s:s?, s:s, s:f, s:o, s:s?, s:f, s:f}", "turn", t->turn,
                     "prompt", t->prompt, "action", t->action, "summary", t->summary, "code",
                     t->code, "status", pk_status_name(t->status), "score", t->score, "result",
                     result ? result : json_null(), "feedback", t->feedback, "started_at",
                     t->started_at, "finished_at", t->finished_at);
}

/* The reply's fields, wherever the episode was found. Consumes seed, settings, turns and
 * returns. */
static json_t *trajectory_json(const pk_episode_row *row, json_t *seed, int done, int in_flight,
                               json_t *settings, json_t *turns, json_t *returns) {
    return json_pack("{s:s, s:s, s:s?, s:o, s:i, s:b, s:b, s:o, s:o, s:o}", "episode",
                     row->episode_id, "problem", row->problem_id, "group", row->group, "seed",
                     seed ? seed : json_null(), "max_turns", row->max_turns, "done", done,
                     "in_flight", in_flight, "settings", settings ? settings : json_null(), "turns",
                     turns, "returns", returns);
}

/* An episode in memory. Its stored turns keep only what the next prompt needs there; their
 * prompts, actions and results are read from the store (committed before they were freed). */
static void memory_trajectory(pk_call *c, const pk_episode *e) {
    pk_store_episode *stored = NULL;
    pk_error err;
    if (e->n_trimmed > 0 && pk_store_read_episode(c->s->reader, e->id, &stored, &err) != PK_OK) {
        pk_call_error(c, PK_E_INTERNAL, "%s", err.message);
        return;
    }
    json_t *turns = json_array();
    for (int i = 0; turns && i < e->n_turns; i++) {
        if (i < e->n_trimmed) {
            if (!stored || i >= stored->n_turns || stored->turns[i].turn != i + 1) {
                pk_store_episode_free(stored);
                json_decref(turns);
                pk_call_error(c, PK_E_INTERNAL, "turn %d of episode %s is not in the store", i + 1,
                              e->id);
                return;
            }
            json_array_append_new(turns, turn_json(&stored->turns[i]));
            continue;
        }
        json_array_append_new(turns, turn_json(&e->turns[i]));
    }
    pk_episode_row row = {.episode_id = e->id,
                          .problem_id = pk_problem_id(e->problem),
                          .group = e->group,
                          .max_turns = e->max_turns};
    pk_store_episode_free(stored);
    pk_call_ok(c, trajectory_json(&row, json_integer(e->seed), e->done, e->in_flight != NULL,
                                  json_incref(e->settings), turns, pk_returns_json(e)));
}

/* A closed or expired episode (or one of an earlier server run on this data dir): read back
 * from the store. Nothing of it is in flight. Returns 0 when the store has no such episode. */
static int stored_trajectory(pk_call *c, const char *id) {
    pk_store_episode *e = NULL;
    pk_error err;
    pk_error_clear(&err);
    if (pk_store_read_episode(c->s->reader, id, &e, &err)) {
        pk_call_error(c, PK_E_INTERNAL, "%s", err.message);
        return 1;
    }
    if (!e)
        return 0;
    /* The stored settings are the ones reset returned; they hold the seed (in episodes stored
     * before seeds were drawn, null for "none" where the seed column says -1). */
    json_t *settings = e->row.config_json ? json_loads(e->row.config_json, 0, NULL) : NULL;
    json_t *seed = json_object_get(settings, "seed");
    seed = seed ? json_incref(seed) : e->row.seed < 0 ? json_null() : json_integer(e->row.seed);
    json_t *turns = json_array();
    for (int i = 0; turns && i < e->n_turns; i++)
        json_array_append_new(turns, turn_json(&e->turns[i]));
    json_t *returns = e->finished ? json_array() : json_null();
    for (int i = 0; e->finished && returns && i < e->n_turns; i++)
        json_array_append_new(returns, json_real(e->returns[i]));
    pk_call_ok(c, trajectory_json(&e->row, seed, e->finished, 0, settings, turns, returns));
    pk_store_episode_free(e);
    return 1;
}

void pk_op_trajectory(pk_call *c) {
    char *id;
    pk_error err;
    if (pk_request_str(c->req, "episode", 1, 256, &id, &err)) {
        pk_call_error(c, PK_E_BAD_REQUEST, "%s", err.message);
        return;
    }
    /* In memory: open, or closed with its last step not yet committed (it has the newest
     * state then). Else the store: close or expiry frees an episode only after every turn it
     * replied to is committed, so the store has all of its turns. */
    pk_episode *e = pk_episode_find(&c->s->episodes, id);
    if (e)
        memory_trajectory(c, e);
    else if (!stored_trajectory(c, id))
        pk_call_error(c, PK_E_UNKNOWN_EPISODE,
                      "no episode '%s' in memory or in the trajectory store (never opened with "
                      "this --data-dir)",
                      id);
    free(id);
}
