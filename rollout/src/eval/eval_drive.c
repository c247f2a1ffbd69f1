/* The episode driver: keeps up to --concurrency episodes open, pipelines their requests on
 * one client socket, asks the policy for each action (cmd policies on threads), retries
 * steps the server refused as overloaded or busy, and records every turn. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pk_client.h"
#include "pk_eval_internal.h"

#define RETRY_MS 200
#define MAX_HARNESS_RETRIES 2
#define MAX_INFRA_RETRIES 1 /* the server has already run it twice */

enum slot_state { S_WAITING, S_RESET, S_ACT, S_ACTING, S_STEP, S_RETRY, S_DONE };

typedef struct slot {
    pk_eval_traj *t;
    int state;
    char *episode, *prompt, *feedback, *action;
    uint64_t req;
    double sent_ms, retry_at_ms;
    int harness_retries;
    int infra_retries;
    /* cmd policy thread */
    pthread_t th;
    pk_eval_policy *policy;
    pk_eval_obs obs;
    int act_rc;
    pk_error act_err;
    volatile int act_done;
} slot;

typedef struct driver {
    pk_client *c;
    pk_eval_run *run;
    const pk_eval_args *a;
    pk_eval_policy *policy;
    slot *slots;
    int n_open, n_done, n_acting, n_correct_turns;
    int tty;
    double t0, last_bar_ms;
} driver;

static const char *problem_id(driver *d, slot *s) {
    return d->run->problems[s->t->problem].id;
}

static void set_str(char **dst, const char *src) {
    free(*dst);
    *dst = src ? strdup(src) : NULL;
}

static int send_request(driver *d, slot *s, json_t *req, pk_error *err) {
    if (!req)
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    int rc = pk_client_send(d->c, req, &s->req, err);
    json_decref(req);
    s->sent_ms = pk_now_ms();
    return rc;
}

static void finish(driver *d, slot *s, const char *error) {
    if (error && !s->t->error)
        s->t->error = strdup(error);
    if (s->episode) {
        json_t *req = json_pack("{s:s, s:s}", "op", "close", "episode", s->episode);
        uint64_t ignored;
        if (req)
            pk_client_send(d->c, req, &ignored, NULL); /* its reply is dropped */
        json_decref(req);
    }
    if (error && !d->a->quiet)
        fprintf(stderr, "%spkgym eval: %s #%d: %s\n", d->tty ? "\r\033[K" : "", problem_id(d, s),
                s->t->index, error);
    s->state = S_DONE;
    s->req = 0;
    d->n_open--;
    d->n_done++;
}

static int start_reset(driver *d, slot *s, pk_error *err) {
    /* LABEL/<problem>: one normalization set per problem and run, never shared with another
     * run unless asked for (--group). */
    if (!s->t->group) {
        pk_strbuf g = {0};
        if (pk_strbuf_printf(&g, "%s/%s", d->a->group ? d->a->group : d->a->run_id,
                             problem_id(d, s)))
            return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
        s->t->group = pk_strbuf_take(&g);
    }
    json_t *req = json_pack("{s:s, s:s, s:i, s:s}", "op", "reset", "problem", problem_id(d, s),
                            "max_turns", d->a->turns, "group", s->t->group);
    if (req && d->a->seed >= 0)
        json_object_set_new(req, "seed", json_integer(d->a->seed));
    if (req && (d->a->options || d->a->examples)) {
        char *text = pk_eval_reset_options(d->a, d->a->examples != NULL, err);
        if (!text) {
            json_decref(req);
            return err->code;
        }
        json_t *o = json_loads(text, 0, NULL);
        free(text);
        if (!o) {
            json_decref(req);
            return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
        }
        json_object_set_new(req, "options", o);
    }
    s->state = S_RESET;
    d->n_open++;
    return send_request(d, s, req, err);
}

static int send_step(driver *d, slot *s, pk_error *err) {
    s->state = S_STEP;
    return send_request(
        d, s,
        json_pack("{s:s, s:s, s:s}", "op", "step", "episode", s->episode, "action", s->action),
        err);
}

static void take_action(driver *d, slot *s, int rc, const pk_error *perr, char *action) {
    free(s->action);
    s->action = action;
    pk_error err;
    if (rc) {
        finish(d, s, perr->message);
    } else if (!action) {
        s->t->policy_ended = 1;
        finish(d, s, NULL);
    } else if (send_step(d, s, &err)) {
        finish(d, s, err.message);
    }
}

static void fill_obs(driver *d, slot *s) {
    s->obs = (pk_eval_obs){.problem = problem_id(d, s),
                           .trajectory = s->t->index,
                           .turn = s->t->n_turns + 1,
                           .prompt = s->prompt,
                           .feedback = s->feedback};
}

static void *act_thread(void *arg) {
    slot *s = arg;
    char *action = NULL;
    s->act_rc = pk_eval_policy_act(s->policy, &s->obs, &action, &s->act_err);
    s->action = action;
    __atomic_store_n(&s->act_done, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void act(driver *d, slot *s) {
    fill_obs(d, s);
    if (!pk_eval_policy_is_cmd(d->policy)) {
        char *action = NULL;
        pk_error err;
        int rc = pk_eval_policy_act(d->policy, &s->obs, &action, &err);
        take_action(d, s, rc, &err, action);
        return;
    }
    if (d->n_acting >= d->a->policy_jobs)
        return; /* stays in S_ACT until a policy job is free */
    s->policy = d->policy;
    s->act_done = 0;
    free(s->action);
    s->action = NULL;
    if (pthread_create(&s->th, NULL, act_thread, s) != 0) {
        finish(d, s, "cannot start a policy thread");
        return;
    }
    s->state = S_ACTING;
    d->n_acting++;
}

static void reap_actions(driver *d) {
    for (int i = 0; i < d->run->n_trajs; i++) {
        slot *s = &d->slots[i];
        if (s->state != S_ACTING || !__atomic_load_n(&s->act_done, __ATOMIC_ACQUIRE))
            continue;
        pthread_join(s->th, NULL);
        d->n_acting--;
        char *action = s->action;
        s->action = NULL;
        take_action(d, s, s->act_rc, &s->act_err, action);
    }
}

static void print_step(driver *d, slot *s, json_t *reply) {
    json_t *info = json_object_get(reply, "info");
    const pk_eval_turn *t = &s->t->turns[s->t->n_turns - 1];
    const char *fb =
        json_string_value(json_object_get(json_object_get(reply, "observation"), "feedback"));
    printf("%s== %s  trajectory %d  turn %d: %s  reward %.3f", d->tty ? "\r\033[K" : "",
           problem_id(d, s), s->t->index, s->t->n_turns, pk_status_name((pk_status)t->status),
           t->reward);
    if (t->status == PK_STATUS_CORRECT && json_is_number(json_object_get(info, "speedup")))
        printf("  speedup %.3fx", t->speedup);
    printf("\n%s\n", fb ? fb : "(no feedback)");
    fflush(stdout);
}

static void print_returns(slot *s) {
    printf("   returns of %d turns:", s->t->n_turns);
    for (int i = 0; s->t->returns && i < s->t->n_turns; i++)
        printf(" %.3f", s->t->returns[i]);
    printf("%s\n\n", s->t->returns ? "" : " (not reported)");
    fflush(stdout);
}

static void read_returns(slot *s, json_t *info) {
    json_t *r = json_object_get(info, "returns");
    if (!json_is_array(r) || (int)json_array_size(r) != s->t->n_turns)
        return;
    s->t->returns = calloc((size_t)s->t->n_turns, sizeof *s->t->returns);
    for (int i = 0; s->t->returns && i < s->t->n_turns; i++)
        s->t->returns[i] = json_number_value(json_array_get(r, (size_t)i));
}

/* Counts the examples a prompt carried (episodes that asked for them only). */
static void count_examples(driver *d, json_t *reply) {
    json_t *x = json_object_get(json_object_get(reply, "info"), "examples");
    if (!json_is_object(x))
        return;
    pk_eval_examples_seen *seen = &d->run->examples;
    size_t shown = json_array_size(json_object_get(x, "entries"));
    seen->prompts++;
    seen->prompts_with_examples += shown > 0;
    seen->shown += (long)shown;
    seen->dropped_for_budget += (long)json_integer_value(json_object_get(x, "dropped_for_budget"));
    seen->errors += json_is_string(json_object_get(x, "error"));
}

static void on_step(driver *d, slot *s, json_t *reply) {
    json_t *info = json_object_get(reply, "info");
    json_t *obs = json_object_get(reply, "observation");
    int status = pk_status_from_name(json_string_value(json_object_get(info, "status")));
    if (status < 0 || s->t->n_turns >= d->a->turns) {
        finish(d, s, "the step reply has no known status");
        return;
    }
    pk_eval_turn *t = &s->t->turns[s->t->n_turns++];
    t->status = status;
    t->speedup = json_number_value(json_object_get(info, "speedup")); /* 0 when null */
    t->reward = json_number_value(json_object_get(reply, "reward"));
    t->time_us = json_number_value(json_object_get(info, "time_us")); /* 0 when null */
    t->roofline_floor_us = json_number_value(json_object_get(info, "roofline_floor_us"));
    t->roofline_no_overlap_us = json_number_value(json_object_get(info, "roofline_no_overlap_us"));
    /* How far the speedup can be trusted: both timings' CV (servers that predate `baseline`
     * give none: not flagged). */
    json_t *baseline = json_object_get(info, "baseline");
    t->time_cv = json_number_value(json_object_get(info, "time_cv"));
    t->baseline_cv = json_number_value(json_object_get(baseline, "cv"));
    const char *source = json_string_value(json_object_get(baseline, "source"));
    t->baseline_cached = source && strcmp(source, "cached") == 0;
    t->noisy = t->speedup > 0 && (t->time_cv > d->a->noisy_cv || t->baseline_cv > d->a->noisy_cv);
    const char *gpu = json_string_value(json_object_get(info, "gpu"));
    snprintf(t->gpu, sizeof t->gpu, "%s", gpu ? gpu : "");
    json_t *profile = json_object_get(info, "profile");
    const char *pstatus = json_string_value(json_object_get(profile, "status"));
    snprintf(t->profile_status, sizeof t->profile_status, "%s", pstatus ? pstatus : "");
    t->profile_cost_s = json_number_value(json_object_get(profile, "cost_s"));
    json_t *raw = json_object_get(profile, "raw");
    t->profile_raw = json_is_object(raw) ? json_dumps(raw, JSON_COMPACT) : NULL;
    d->run->steps++;
    d->n_correct_turns += status == PK_STATUS_CORRECT;
    s->harness_retries = 0;
    set_str(&s->prompt, json_string_value(json_object_get(obs, "prompt")));
    set_str(&s->feedback, json_string_value(json_object_get(obs, "feedback")));
    if (d->a->transcript)
        print_step(d, s, reply);
    int ended = json_is_true(json_object_get(reply, "terminated")) ||
                json_is_true(json_object_get(reply, "truncated"));
    if (ended || s->t->n_turns >= d->a->turns) {
        read_returns(s, info);
        if (d->a->transcript)
            print_returns(s);
        finish(d, s, NULL);
        return;
    }
    count_examples(d, reply); /* the next prompt's: it will be answered */
    s->state = S_ACT;
}

static void on_reply(driver *d, slot *s, json_t *reply) {
    if (!json_is_true(json_object_get(reply, "ok"))) {
        json_t *e = json_object_get(reply, "error");
        const char *code = json_string_value(json_object_get(e, "code"));
        const char *msg = json_string_value(json_object_get(e, "message"));
        code = code ? code : "?";
        int retry = strcmp(code, "overloaded") == 0 || strcmp(code, "busy") == 0;
        if (s->state == S_STEP && strcmp(code, "internal") == 0 &&
            s->harness_retries++ < MAX_HARNESS_RETRIES)
            retry = 1; /* the harness failed: no turn was recorded, the same action may retry */
        int infra = s->state == S_STEP && strcmp(code, "infra_error") == 0;
        if (infra && !d->a->quiet)
            fprintf(stderr, "%spkgym eval: %s #%d: infra_error, not the model's failure; %s: %s\n",
                    d->tty ? "\r\033[K" : "", problem_id(d, s), s->t->index,
                    s->infra_retries < MAX_INFRA_RETRIES
                        ? "sending the same action again"
                        : "this trajectory is dropped from every figure",
                    msg ? msg : "");
        if (infra && s->infra_retries++ < MAX_INFRA_RETRIES)
            retry = 1;
        else if (infra)
            s->t->infra = 1;
        if (retry) {
            s->retry_at_ms = pk_now_ms() + RETRY_MS;
            s->state = s->state == S_RESET ? S_WAITING : S_RETRY;
            if (s->state == S_WAITING)
                d->n_open--;
            return;
        }
        char text[700];
        snprintf(text, sizeof text, "%s: %s", code, msg ? msg : "(no message)");
        finish(d, s, text);
        return;
    }
    if (s->state == S_RESET) {
        set_str(&s->episode, json_string_value(json_object_get(reply, "episode")));
        set_str(&s->t->episode, s->episode);
        json_t *seed =
            json_object_get(json_object_get(json_object_get(reply, "info"), "settings"), "seed");
        s->t->seed = json_is_integer(seed) ? (long long)json_integer_value(seed) : -1;
        set_str(&s->prompt, json_string_value(
                                json_object_get(json_object_get(reply, "observation"), "prompt")));
        count_examples(d, reply);
        if (!s->episode)
            finish(d, s, "reset reply without an episode id");
        else
            s->state = S_ACT;
    } else if (s->state == S_STEP) {
        on_step(d, s, reply);
    }
}

static slot *slot_of(driver *d, uint64_t id) {
    for (int i = 0; i < d->run->n_trajs; i++)
        if (d->slots[i].req == id && (d->slots[i].state == S_RESET || d->slots[i].state == S_STEP))
            return &d->slots[i];
    return NULL;
}

static void progress(driver *d, int force) {
    double now = pk_now_ms();
    if (!d->tty || d->a->quiet || d->a->transcript || (!force && now - d->last_bar_ms < 100))
        return;
    d->last_bar_ms = now;
    int width = 30, filled = d->run->n_trajs ? width * d->n_done / d->run->n_trajs : width;
    char bar[64];
    for (int i = 0; i < width; i++)
        bar[i] = i < filled ? '#' : '.';
    bar[width] = 0;
    double secs = (now - d->t0) / 1000.0;
    fprintf(stderr, "\r\033[K[%s] %d/%d trajectories  %d steps  %d correct  %.1f steps/s", bar,
            d->n_done, d->run->n_trajs, d->run->steps, d->n_correct_turns,
            secs > 0 ? d->run->steps / secs : 0.0);
    fflush(stderr);
}

static int pump(driver *d, pk_eval_server *embedded, pk_error *err) {
    double now = pk_now_ms();
    for (int i = 0; i < d->run->n_trajs; i++) {
        slot *s = &d->slots[i];
        if (s->state == S_WAITING && d->n_open < d->a->concurrency && now >= s->retry_at_ms) {
            if (start_reset(d, s, err))
                return err->code ? err->code : PK_ERR_IO;
        }
        if (s->state == S_ACT)
            act(d, s);
        if (s->state == S_RETRY && now >= s->retry_at_ms && send_step(d, s, err))
            finish(d, s, err->message);
        if ((s->state == S_RESET || s->state == S_STEP) &&
            now - s->sent_ms > d->a->step_timeout_s * 1000.0)
            finish(d, s, "no reply within --step-timeout-s");
    }
    reap_actions(d);
    json_t *reply = NULL;
    pk_error rerr;
    int rc = pk_client_recv(d->c, 20, &reply, &rerr);
    while (rc == PK_OK) {
        json_t *id = json_object_get(reply, "id");
        slot *s = json_is_integer(id) ? slot_of(d, (uint64_t)json_integer_value(id)) : NULL;
        if (s)
            on_reply(d, s, reply);
        json_decref(reply);
        reply = NULL;
        rc = pk_client_recv(d->c, 0, &reply, &rerr);
    }
    if (rc != PK_ERR_TIMEOUT)
        return pk_error_set(err, rc, "%s", rerr.message);
    if (embedded && (rc = pk_eval_server_check(embedded, err)))
        return rc;
    progress(d, 0);
    return PK_OK;
}

static int alloc_trajs(pk_eval_run *run, int G, int T, pk_error *err) {
    int active = 0;
    for (int p = 0; p < run->n_problems; p++)
        active += !run->problems[p].skipped;
    run->trajs = calloc((size_t)active * (size_t)G, sizeof *run->trajs);
    if (!run->trajs)
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    /* Trajectory-major order: every problem makes progress from the start. */
    for (int g = 0; g < G; g++) {
        for (int p = 0; p < run->n_problems; p++) {
            if (run->problems[p].skipped)
                continue;
            pk_eval_traj *t = &run->trajs[run->n_trajs++];
            t->problem = p;
            t->index = g + 1;
            t->seed = -1;
            t->turns = calloc((size_t)T, sizeof *t->turns);
            if (!t->turns)
                return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
        }
    }
    return PK_OK;
}

int pk_eval_drive(pk_client *c, pk_eval_server *embedded, pk_eval_policy *policy, pk_eval_run *run,
                  pk_error *err) {
    const pk_eval_args *a = run->args;
    int rc = alloc_trajs(run, a->trajectories, a->turns, err);
    if (rc)
        return rc;
    driver d = {.c = c, .run = run, .a = a, .policy = policy, .tty = isatty(STDERR_FILENO)};
    d.slots = calloc((size_t)run->n_trajs, sizeof *d.slots);
    if (!d.slots)
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    for (int i = 0; i < run->n_trajs; i++)
        d.slots[i].t = &run->trajs[i];
    d.t0 = pk_now_ms();
    while (!rc && d.n_done < run->n_trajs)
        rc = pump(&d, embedded, err);
    progress(&d, 1);
    if (d.tty && !a->quiet && !a->transcript)
        fprintf(stderr, "\n");
    run->wall_s = (pk_now_ms() - d.t0) / 1000.0;
    for (int i = 0; i < run->n_trajs; i++) {
        slot *s = &d.slots[i];
        if (s->state == S_ACTING)
            pthread_join(s->th, NULL);
        free(s->episode);
        free(s->prompt);
        free(s->feedback);
        free(s->action);
    }
    free(d.slots);
    return rc;
}

void pk_eval_run_free(pk_eval_run *run) {
    for (int i = 0; i < run->n_problems; i++) {
        free(run->problems[i].id);
        free(run->problems[i].reason);
    }
    free(run->problems);
    for (int i = 0; i < run->n_trajs; i++) {
        for (int k = 0; run->trajs[i].turns && k < run->trajs[i].n_turns; k++)
            free(run->trajs[i].turns[k].profile_raw);
        free(run->trajs[i].turns);
        free(run->trajs[i].episode);
        free(run->trajs[i].group);
        free(run->trajs[i].returns);
        free(run->trajs[i].error);
    }
    free(run->trajs);
    json_decref(run->server_hello);
    json_decref(run->server_stats);
    memset(run, 0, sizeof *run);
}
