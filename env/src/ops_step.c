/* step: parse the action, submit its code to the scheduler, and when the evaluation completes
 * score it, write feedback and the next prompt, store the turn and reply. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "call_lookup.h"
#include "episode_rules.h"
#include "episode_store.h"
#include "observation.h"
#include "ops.h"
#include "pk_splitmix.h"
#include "archive_feed.h"
#include "episode_examples.h"
#include "store_then_reply.h"

static void free_pending(pk_pending_step *p) {
    if (!p)
        return;
    pk_client_release(p->client, 0, 1);
    free(p->id_raw);
    pk_turn_free(&p->turn);
    free(p);
}

/* Harness text (reasons, check details) may quote compiler or candidate output. */
static json_t *text_json(const char *text) {
    char *clean = pk_utf8_sanitize(text);
    json_t *j = clean ? json_string(clean) : NULL;
    free(clean);
    return j;
}

static json_t *checks_json(const pk_eval_result *r) {
    json_t *a = json_array();
    for (int i = 0; a && i < r->n_checks; i++)
        json_array_append_new(a, json_pack("{s:o, s:b, s:o}", "name", text_json(r->checks[i].name),
                                           "passed", r->checks[i].passed, "detail",
                                           text_json(r->checks[i].detail)));
    return a;
}

static json_t *timed_or_null(int timed, double v) {
    return timed ? json_real(v) : json_null();
}

/* The baseline the speedup used: timed in this step or cached (then the reference was not
 * timed), with its CV, repetitions and when it was measured. */
static json_t *baseline_json(const pk_eval_result *r) {
    const pk_baseline_used *b = &r->baseline;
    if (!r->has_timing || !(b->us > 0))
        return json_null();
    return json_pack("{s:f, s:f, s:i, s:s, s:o}", "us", b->us, "cv", b->cv, "iters", b->iters,
                     "source", b->cached ? "cached" : "measured", "measured_at",
                     b->measured_at > 0 ? json_real(b->measured_at) : json_null());
}

/* The terms of `reward` and the speedup it used, named as reward/ describes them (they sum to
 * it). */
static json_t *reward_parts_json(const pk_reward_parts *p) {
    json_t *o = json_object();
    for (int i = 0; o && i < PK_REWARD_PART_COUNT; i++)
        json_object_set_new(o, pk_reward_part_name(i), json_real(pk_reward_part_value(p, i)));
    return o;
}

static json_t *step_info_base(const pk_episode *e, const pk_eval_result *r,
                              const pk_reward_parts *parts) {
    int timed = r->has_timing && r->status == PK_STATUS_CORRECT;
    /* Results of older harness builds lack `baseline`: the reference time is the baseline. */
    double base_us = r->baseline.us > 0 ? r->baseline.us : r->reference.median_us;
    json_t *info = json_pack("{s:i, s:s, s:b, s:o, s:o, s:o, s:o, s:o, s:o, s:f, s:f, s:o, s:o}",
                             "turn", e->n_turns, "status", pk_status_name(r->status), "correct",
                             r->status == PK_STATUS_CORRECT, "reason", text_json(r->reason),
                             "speedup", timed_or_null(timed, r->speedup), "time_us",
                             timed_or_null(r->has_timing, r->candidate.median_us), "time_cv",
                             timed_or_null(r->has_timing, r->candidate.cv), "baseline_us",
                             timed_or_null(r->has_timing, base_us), "baseline", baseline_json(r),
                             "compile_ms", r->stages.compile_ms, "run_ms", r->stages.run_ms,
                             "checks", checks_json(r), "returns", pk_returns_json(e));
    if (info)
        json_object_set_new(info, "reward_parts", reward_parts_json(parts));
    return info;
}

/* What became of the profile the episode asks for (docs/feedback.md, "Profiles"): never a
 * failure of the step. text: the feedback's lines; raw: every kernel and interval (the store
 * keeps it too), left out (null, raw_omitted) above PROFILE_INFO_RAW_MAX bytes. */
#define PROFILE_INFO_RAW_MAX (256 << 10)
static json_t *profile_info(const pk_episode *e, const pk_eval_result *r) {
    const pk_profile_result *p = &r->profile;
    const char *status = p->status[0] ? p->status : "skipped";
    const char *reason = p->status[0] ? p->reason
                         : r->status != PK_STATUS_CORRECT
                             ? "not correct (only correct candidates are profiled)"
                             : "this evaluator does not profile (remote workers: not yet)";
    int omit = p->raw && strlen(p->raw) > PROFILE_INFO_RAW_MAX;
    json_t *raw = p->raw && !omit ? json_loads(p->raw, 0, NULL) : NULL;
    return json_pack(
        "{s:s, s:s, s:o, s:o, s:o, s:o, s:b}", "level", pk_profile_level_name(e->eval.profile),
        "status", status, "reason", text_json(reason), "cost_s",
        p->status[0] && strcmp(p->status, "skipped") ? json_real(p->cost_s) : json_null(), "text",
        p->text ? text_json(p->text) : json_null(), "raw", raw ? raw : json_null(), "raw_omitted",
        omit);
}

/* With both rooflines of the problem on this GPU (docs/problems.md), null when it has none. */
static json_t *step_info(const pk_episode *e, const pk_eval_result *r,
                         const pk_reward_parts *parts) {
    json_t *info = step_info_base(e, r, parts);
    if (info) {
        json_object_set_new(info, "roofline_floor_us",
                            r->roofline_floor_us > 0 ? json_real(r->roofline_floor_us)
                                                     : json_null());
        json_object_set_new(info, "roofline_no_overlap_us",
                            r->roofline_no_overlap_us > 0 ? json_real(r->roofline_no_overlap_us)
                                                          : json_null());
        /* the model the turn was measured on; speedups compare within one model */
        json_object_set_new(info, "gpu", r->gpu_name[0] ? text_json(r->gpu_name) : json_null());
        if (e->eval.profile > 0)
            json_object_set_new(info, "profile", profile_info(e, r));
    }
    return info;
}

/* Appends the finished turn to e (scored, the terms of its score in *parts) once everything it
 * needs exists; on failure e is unchanged, so that no turn is kept in memory that the store
 * never gets. */
static int record_turn(pk_server *s, pk_episode *e, pk_pending_step *p, const pk_eval_result *r,
                       pk_reward_parts *parts, pk_error *err) {
    pk_turn t = p->turn;
    memset(&p->turn, 0, sizeof p->turn);
    t.turn = e->n_turns + 1;
    t.status = r->status;
    t.finished_at = pk_wall_time_s();
    t.result_json = pk_eval_result_to_json(r);
    t.feedback = pk_utf8_sanitize_take(pk_summarizer_feedback(e->summarizer, r, e->problem));
    pk_turn_facts facts;
    int rc;
    if (!t.result_json)
        rc = pk_error_set(err, PK_ERR_INTERNAL, "the evaluation result could not be encoded");
    else if (!t.feedback)
        rc = pk_error_set(err, PK_ERR_NOMEM, "out of memory writing feedback");
    else
        rc = pk_turn_facts_from_result_json(t.result_json, &facts, err);
    if (!rc) {
        pk_reward_breakdown(&e->reward, &facts, parts);
        t.score = parts->total;
        if (pk_episode_add_turn(e, &t))
            rc = pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    }
    pk_turn_free(&t); /* empty once added */
    return rc;
}

/* The harness copies compiler and candidate output into the result: make every text valid
 * UTF-8 before it reaches JSON, msgpack, feedback or the store. */
static void sanitize_result(pk_eval_result *r) {
    r->compile_log = pk_utf8_sanitize_take(r->compile_log);
    r->stdout_tail = pk_utf8_sanitize_take(r->stdout_tail);
    r->stderr_tail = pk_utf8_sanitize_take(r->stderr_tail);
    pk_utf8_sanitize_buf(r->reason, sizeof r->reason);
    pk_utf8_sanitize_buf(r->rule, sizeof r->rule);
    pk_utf8_sanitize_buf(r->launcher, sizeof r->launcher);
    pk_utf8_sanitize_buf(r->gpu_name, sizeof r->gpu_name);
    for (int i = 0; i < r->n_checks && i < PK_EVAL_MAX_CHECKS; i++) {
        pk_utf8_sanitize_buf(r->checks[i].name, sizeof r->checks[i].name);
        pk_utf8_sanitize_buf(r->checks[i].detail, sizeof r->checks[i].detail);
    }
    for (int i = 0; i < r->n_trials && i < PK_EVAL_MAX_TRIALS; i++)
        for (int k = 0; k < r->trials[i].n_mismatch && k < PK_EVAL_MAX_RANKS; k++)
            pk_utf8_sanitize_buf(r->trials[i].mismatch[k].arg, sizeof r->trials[i].mismatch[k].arg);
}

/* Takes back the turn record_turn appended (the step before it did not end the episode). */
static void unrecord_turn(pk_episode *e) {
    pk_episode_drop_last_turn(e);
    e->done = 0;
    free(e->returns);
    e->returns = NULL;
}

/* The reply to a step whose turn was recorded, and its store job; NULL (with *why) when one
 * cannot be built. */
static json_t *turn_reply(pk_episode *e, const pk_eval_result *r, const pk_reward_parts *parts,
                          pk_store_job **job, const char **why) {
    const pk_turn *t = &e->turns[e->n_turns - 1];
    int terminated, truncated;
    if (pk_episode_ended(e, &terminated, &truncated))
        pk_episode_finish(e);
    *job = pk_episode_store_job(e);
    char *prompt = *job ? pk_episode_next_prompt(e) : NULL;
    json_t *messages = prompt ? pk_episode_messages_json(e) : NULL;
    json_t *body =
        messages ? json_pack("{s:{s:s, s:s, s:i, s:o}, s:f, s:b, s:b, s:o}", "observation",
                             "prompt", prompt, "feedback", t->feedback, "turn", e->n_turns,
                             "messages", messages, "reward", t->score, "terminated", terminated,
                             "truncated", truncated, "info", step_info(e, r, parts))
                 : NULL;
    if (!body) {
        *why = !*job     ? "out of memory preparing the store write"
               : !prompt ? "out of memory building the next prompt"
                         : "out of memory building the reply";
        free(prompt);
        pk_store_job_free(*job);
        *job = NULL;
        return NULL;
    }
    json_t *examples = pk_episode_examples_info(e);
    if (examples) /* only when asked for: which entries the next prompt used */
        json_object_set_new(json_object_get(body, "info"), "examples", examples);
    free(e->prompt);
    e->prompt = prompt;
    return body;
}

/* Completes a step with its evaluation result and replies. Consumes p. A turn is kept only
 * together with its store write: on any failure the step is answered `internal` and the
 * episode is as before it (the client may send the action again). */
static void complete_step(pk_server *s, pk_pending_step *p, pk_eval_result *r) {
    pk_episode *e = p->ep;
    pk_error err;
    pk_error_clear(&err);
    sanitize_result(r);
    e->in_flight = NULL;
    if (!e->gpu_model[0] && r->gpu_name[0])
        snprintf(e->gpu_model, sizeof e->gpu_model, "%s", r->gpu_name);
    e->last_active_ms = pk_now_ms();
    s->n.steps_done++;
    const char *why = err.message;
    pk_store_job *job = NULL;
    json_t *body = NULL;
    pk_reward_parts parts;
    if (record_turn(s, e, p, r, &parts, &err) == PK_OK &&
        !(body = turn_reply(e, r, &parts, &job, &why)))
        unrecord_turn(e);
    pk_episode_recharge(e);
    if (body) {
        pk_server_archive_turn(s, e, r);
        /* The reply goes out once the turn is committed to the store; an episode closed
         * meanwhile stays in memory until then, so `trajectory` never misses the turn. */
        pk_server_store_then_reply(s, job, &p->env, p->id_raw, p->id_len, body, NULL, e);
        p->id_raw = NULL; /* now owned by the deferred reply */
        free_pending(p);
        return;
    }
    pk_journal_step_end(s->journal, e->id); /* no turn: a restart must not await one */
    pk_server_reply(s, &p->env, p->id_raw, p->id_len, pk_error_body(PK_E_INTERNAL, why));
    free_pending(p);
    pk_server_release_if_closed(s, e);
}

void pk_server_on_completion(pk_server *s, pk_completion *done) {
    pk_pending_step *p = done->user;
    s->n.steps_in_flight--;
    /* A completion record starts zeroed, which reads as format_error: one without a reason
     * after the server extracted code is a result no stage wrote (an executor that returned
     * early without setting harness_rc). Never charge it to the model. */
    int no_verdict = !done->harness_rc && done->result.status == PK_STATUS_FORMAT_ERROR &&
                     done->result.reason[0] == '\0';
    if (no_verdict)
        snprintf(done->error.message, sizeof done->error.message,
                 "the harness returned no verdict for this code (stages run: compile %.0f ms, "
                 "run %.0f ms); no turn was recorded",
                 done->result.stages.compile_ms, done->result.stages.run_ms);
    /* Ours, not the candidate's (failed before its code was loaded, twice): never a turn nor
     * a reward. A status infra_error without harness_rc (a worker's, through the broker)
     * is the same. */
    int infra = done->harness_rc == PK_ERR_INFRA ||
                (!done->harness_rc && done->result.status == PK_STATUS_INFRA_ERROR);
    if (infra && !done->harness_rc)
        snprintf(done->error.message, sizeof done->error.message, "%s", done->result.reason);
    if (done->harness_rc || no_verdict || infra) {
        /* The harness itself failed: no verdict exists, so no turn is recorded and the
         * client may retry the same action. */
        pk_episode *e = p->ep;
        e->in_flight = NULL;
        pk_episode_recharge(e);
        pk_journal_step_end(s->journal, e->id);
        s->n.steps_infra += infra;
        pk_server_reply(s, &p->env, p->id_raw, p->id_len,
                        pk_error_body(infra ? PK_E_INFRA : PK_E_INTERNAL, done->error.message));
        free_pending(p);
        pk_server_release_if_closed(s, e);
    } else {
        complete_step(s, p, &done->result);
    }
    pk_completion_free(done);
}

/* Refuses (replies, returns -1) a step that would take what e, its owner or the server hold in
 * memory past their limits (issue 27, finding 4). incoming: what the step brings in until it
 * is answered. */
static int refuse_held_bytes(pk_call *c, const pk_episode *e, size_t incoming) {
    const pk_server_opts *o = &c->s->opts;
    const pk_client_entry *owner = e->owner;
    if (e->bytes + incoming > o->max_episode_bytes) {
        pk_call_error(c, PK_E_BAD_REQUEST,
                      "episode %s holds %zu bytes; this step (%zu more) would pass the limit per "
                      "episode (limits.max_episode_bytes, %zu): close it and reset a new one",
                      e->id, e->bytes, incoming, o->max_episode_bytes);
        return -1;
    }
    if (owner && owner->bytes + incoming > o->max_client_bytes) {
        char who[32];
        pk_client_short_id(owner, who, sizeof who);
        pk_call_error(c, PK_E_OVERLOADED,
                      "client %s holds %zu bytes in its episodes; this step (%zu more) would pass "
                      "the limit per client (limits.max_client_bytes, %zu): close some",
                      who, owner->bytes, incoming, o->max_client_bytes);
        return -1;
    }
    size_t all = c->s->clients.bytes;
    if (all + incoming > o->max_held_bytes) {
        pk_call_error(c, PK_E_OVERLOADED,
                      "open episodes hold %zu bytes; this step (%zu more) would pass the "
                      "server's limit (limits.max_held_bytes, %zu)",
                      all, incoming, o->max_held_bytes);
        return -1;
    }
    return 0;
}

/* Reads step's fields; replies and returns -1 on a bad one. */
static int read_step_fields(pk_call *c, pk_pending_step *p) {
    pk_error err;
    const msgpack_object *a = pk_request_field(c->req, "action");
    if (a && a->type == MSGPACK_OBJECT_STR && a->via.str.size > c->s->opts.max_action_bytes) {
        pk_call_error(c, PK_E_BAD_REQUEST,
                      "field 'action' is %u bytes; the limit is %zu (limits.max_action_bytes)",
                      a->via.str.size, c->s->opts.max_action_bytes);
        return -1;
    }
    if (pk_request_str(c->req, "action", 1, c->s->opts.max_action_bytes, &p->turn.action, &err) ||
        pk_request_str(c->req, "summary", 0, PK_MAX_SUMMARY_BYTES, &p->turn.summary, &err) ||
        pk_request_copy_id(c->req, &p->id_raw, &p->id_len, &err)) {
        pk_call_error(c, err.code == PK_ERR_INVALID ? PK_E_BAD_REQUEST : PK_E_INTERNAL, "%s",
                      err.message);
        return -1;
    }
    return 0;
}

void pk_op_step(pk_call *c) {
    pk_server *s = c->s;
    pk_pending_step *p = calloc(1, sizeof *p);
    if (!p) {
        pk_call_error(c, PK_E_INTERNAL, "out of memory");
        return;
    }
    /* The request's own fields first: a malformed step is bad_request whatever its episode. */
    if (read_step_fields(c, p)) {
        free_pending(p);
        return;
    }
    pk_episode *e = pk_call_episode(c);
    if (!e) {
        free_pending(p);
        return;
    }
    if (e->in_flight) {
        pk_call_error(c, PK_E_BUSY, "episode %s has a step in flight; wait for its reply", e->id);
        free_pending(p);
        return;
    }
    if (e->done) {
        pk_call_error(c, PK_E_EPISODE_DONE, "episode %s ended after %d turn(s); reset a new one",
                      e->id, e->n_turns);
        free_pending(p);
        return;
    }
    if (e->interrupted_turn) {
        /* Restored after a crash with this turn in flight: its request died with the last run
         * (answered here, once, so that it is never silently lost); the next step runs. */
        char when[64];
        time_t t = (time_t)e->interrupted_at;
        struct tm tm;
        strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
        pk_call_error(c, PK_E_INTERNAL,
                      "the server restarted while turn %d of episode %s was being evaluated "
                      "(step started %s); no turn was recorded: send the action again",
                      e->interrupted_turn, e->id, when);
        e->interrupted_turn = 0;
        pk_journal_step_end(s->journal, e->id);
        free_pending(p);
        return;
    }
    /* Charged to the sender from here on, so that one client cannot fill the queue. */
    pk_client_entry *client = pk_call_client(c);
    if (!client) {
        free_pending(p);
        return;
    }
    if (client->steps >= s->opts.max_client_steps) {
        char who[32];
        pk_client_short_id(client, who, sizeof who);
        pk_call_error(c, PK_E_OVERLOADED,
                      "client %s has %d steps in flight, the limit per client "
                      "(limits.max_client_steps); wait for their replies",
                      who, client->steps);
        pk_client_drop_if_unused(client);
        free_pending(p);
        return;
    }
    p->client = client;
    client->steps++;
    p->env = c->env;
    p->ep = e;
    pk_parsed_action pa;
    memset(&pa, 0, sizeof pa);
    pk_error err;
    if (pk_summarizer_parse_action(e->summarizer, p->turn.action, p->turn.summary, &pa, &err)) {
        pk_call_error(c, PK_E_INTERNAL, "parsing the action: %s", err.message);
        free_pending(p);
        return;
    }
    free(p->turn.summary);
    /* The summarizer may cut text mid-character. */
    p->turn.summary = pk_utf8_sanitize_take(pa.summary);
    p->turn.code = pk_utf8_sanitize_take(pa.code);
    pa.summary = pa.code = NULL;
    p->turn.started_at = pk_wall_time_s();
    /* What the model saw for this turn, stored with it (SFT, debugging). */
    p->turn.prompt = e->prompt ? strdup(e->prompt) : NULL;
    if (e->prompt && !p->turn.prompt) {
        pk_call_error(c, PK_E_INTERNAL, "out of memory");
        free_pending(p);
        return;
    }
    /* Until it is answered it holds the action, the code cut from it, the summary and the
     * prompt's copy; once stored, what the next prompt needs (issue 27, finding 4). */
    p->bytes = pk_turn_text_bytes(&p->turn);
    if (refuse_held_bytes(c, e, p->bytes)) {
        pk_parsed_action_free(&pa);
        free_pending(p);
        return;
    }
    e->in_flight = p;
    pk_episode_recharge(e);
    e->last_active_ms = pk_now_ms();
    s->n.steps_in_flight++;
    if (!pa.format_ok) {
        /* Nothing to compile: the turn ends here with status format_error. */
        pk_eval_result r;
        pk_eval_result_init(&r);
        r.status = PK_STATUS_FORMAT_ERROR;
        snprintf(r.reason, sizeof r.reason, "%s", pa.format_error);
        pk_parsed_action_free(&pa);
        s->n.steps_in_flight--;
        complete_step(s, p, &r);
        pk_eval_result_free(&r);
        return;
    }
    pk_parsed_action_free(&pa);
    pk_eval_opts opts = e->eval;
    /* Every episode has a seed (the client's or one drawn at reset): each step's input seed
     * follows from it and the turn, so the episode can be replayed. 0 would mean "draw one". */
    opts.seed = pk_splitmix64((uint64_t)e->seed ^ pk_splitmix64((uint64_t)e->n_turns + 1));
    if (!opts.seed)
        opts.seed = 1;
    opts.profile_budget = &s->profile_budget; /* one budget for the server's GPU slots */
    opts.profile_timeout_s = s->opts.profile_seconds;
    uint64_t ticket;
    int rc = pk_evaluator_submit(&s->ev, e->problem, p->turn.code, &opts, e->gpu_model, p, &ticket,
                                 &err);
    if (!rc) /* a restart then answers this turn `internal` if it never reached the store */
        pk_journal_step_begin(s->journal, e->id, e->n_turns, p->turn.started_at);
    if (rc) {
        e->in_flight = NULL;
        pk_episode_recharge(e);
        s->n.steps_in_flight--;
        free_pending(p);
        pk_call_error(c,
                      rc == PK_ERR_OVERLOADED    ? PK_E_OVERLOADED
                      : rc == PK_ERR_UNSUPPORTED ? PK_E_BAD_REQUEST
                                                 : PK_E_INTERNAL,
                      "%s", err.message);
    }
}
