/* pk_eval_result <-> JSON (jansson). Keys are the struct member names. */
#include "pk_harness.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Candidate output and compiler logs may hold any bytes; JSON strings must be UTF-8. */
static json_t *text(const char *s) {
    if (!s)
        return json_null();
    char *clean = pk_utf8_sanitize(s);
    json_t *j = clean ? json_string(clean) : json_null();
    free(clean);
    return j;
}

static json_t *timing_to_json(const pk_timing *t) {
    return json_pack("{s:f,s:f,s:f,s:f,s:i,s:i}", "median_us", t->median_us, "cv", t->cv, "min_us",
                     t->min_us, "mean_us", t->mean_us, "iters", t->iters, "warmup_iters",
                     t->warmup_iters);
}

static json_t *trial_to_json(const pk_trial_verdict *t) {
    json_t *mm = json_array();
    for (int i = 0; i < t->n_mismatch && i < PK_EVAL_MAX_RANKS; i++) {
        const pk_rank_mismatch *m = &t->mismatch[i];
        json_array_append_new(mm, json_pack("{s:i,s:o,s:I,s:f,s:f}", "rank", m->rank, "arg",
                                            text(m->arg), "index", (json_int_t)m->index, "expected",
                                            m->expected, "got", m->got));
    }
    return json_pack("{s:b,s:f,s:f,s:b,s:i,s:o}", "passed", t->passed, "max_abs_err",
                     t->max_abs_err, "max_rel_err", t->max_rel_err, "inputs_modified",
                     t->inputs_modified, "n_mismatch", t->n_mismatch, "mismatch", mm);
}

/* Only when a profile was asked for: results without one keep their old form. */
static json_t *profile_to_json(const pk_profile_result *p) {
    static const char *const levels[] = {"none", "summary", "full"};
    json_t *raw = p->raw ? json_loads(p->raw, 0, NULL) : NULL;
    return json_pack("{s:s,s:s,s:o,s:f,s:o,s:o}", "level",
                     levels[p->level >= 0 && p->level < 3 ? p->level : 0], "status",
                     p->status[0] ? p->status : "none", "reason", text(p->reason), "cost_s",
                     p->cost_s, "text", text(p->text), "raw", raw ? raw : json_null());
}

static void profile_from_json(const json_t *o, pk_profile_result *p) {
    if (!json_is_object(o))
        return;
    const char *level = json_string_value(json_object_get(o, "level"));
    p->level = !level ? 0 : !strcmp(level, "summary") ? 1 : !strcmp(level, "full") ? 2 : 0;
    const char *status = json_string_value(json_object_get(o, "status"));
    snprintf(p->status, sizeof p->status, "%s", status && strcmp(status, "none") ? status : "");
    const char *reason = json_string_value(json_object_get(o, "reason"));
    snprintf(p->reason, sizeof p->reason, "%s", reason ? reason : "");
    p->cost_s = json_number_value(json_object_get(o, "cost_s"));
    const char *t = json_string_value(json_object_get(o, "text"));
    p->text = t ? strdup(t) : NULL;
    json_t *raw = json_object_get(o, "raw");
    p->raw = json_is_object(raw) ? json_dumps(raw, JSON_COMPACT) : NULL;
}

char *pk_eval_result_to_json(const pk_eval_result *r) {
    json_t *checks = json_array(), *trials = json_array(), *hung = json_array();
    for (int i = 0; i < r->n_checks; i++)
        json_array_append_new(checks,
                              json_pack("{s:o,s:b,s:o}", "name", text(r->checks[i].name), "passed",
                                        r->checks[i].passed, "detail", text(r->checks[i].detail)));
    for (int i = 0; i < r->n_trials && i < PK_EVAL_MAX_TRIALS; i++)
        json_array_append_new(trials, trial_to_json(&r->trials[i]));
    for (int i = 0; i < r->n_hung && i < PK_EVAL_MAX_RANKS; i++)
        json_array_append_new(hung, json_integer(r->hung_ranks[i]));
    const pk_stage_times *s = &r->stages;
    json_t *stages =
        json_pack("{s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f,s:f}", "prepare_ms",
                  s->prepare_ms, "compile_ms", s->compile_ms, "symbols_ms", s->symbols_ms, "run_ms",
                  s->run_ms, "total_ms", s->total_ms, "run_setup_ms", s->run_setup_ms,
                  "run_check_ms", s->run_check_ms, "run_timing_ms", s->run_timing_ms, "run_init_ms",
                  s->run_init_ms, "run_arena_ms", s->run_arena_ms, "run_warm_ms", s->run_warm_ms,
                  "run_verify_ms", s->run_verify_ms, "run_teardown_ms", s->run_teardown_ms,
                  "run_lock_wait_ms", s->run_lock_wait_ms, "run_timing_expect_ms",
                  s->run_timing_expect_ms, "run_timing_hold_ms", s->run_timing_hold_ms);
    json_t *o = json_pack(
        "{s:s,s:o,s:o,s:o,s:o,s:b,s:o,s:o,s:f,s:f,s:f,s:i,s:i,s:o,s:i,s:i,s:o,s:o,s:o,s:o,s:o,s:o}",
        "status", pk_status_name(r->status), "reason", text(r->reason), "rule", text(r->rule),
        "checks", checks, "trials", trials, "has_timing", r->has_timing, "candidate",
        timing_to_json(&r->candidate), "reference", timing_to_json(&r->reference), "speedup",
        r->speedup, "roofline_floor_us", r->roofline_floor_us, "roofline_no_overlap_us",
        r->roofline_no_overlap_us, "world_size", r->world_size, "n_hung", r->n_hung, "hung_ranks",
        hung, "exit_code", r->exit_code, "signal", r->signal, "launcher", text(r->launcher),
        "gpu_name", text(r->gpu_name), "stages", stages, "compile_log", text(r->compile_log),
        "stdout_tail", text(r->stdout_tail), "stderr_tail", text(r->stderr_tail));
    if (!o)
        return NULL;
    const pk_baseline_used *b = &r->baseline;
    json_object_set_new(o, "trials_planned", json_integer(r->trials_planned));
    json_object_set_new(o, "baseline",
                        json_pack("{s:f,s:f,s:i,s:f,s:s}", "us", b->us, "cv", b->cv, "iters",
                                  b->iters, "measured_at", b->measured_at, "source",
                                  b->us <= 0  ? "none"
                                  : b->cached ? "cached"
                                              : "measured"));
    if (r->profile.level > 0)
        json_object_set_new(o, "profile", profile_to_json(&r->profile));
    char *text = json_dumps(o, JSON_COMPACT | JSON_REAL_PRECISION(10));
    json_decref(o);
    return text;
}

static double num(json_t *o, const char *key) {
    return json_number_value(json_object_get(o, key));
}

static int integer(json_t *o, const char *key) {
    return (int)json_integer_value(json_object_get(o, key));
}

static void copy_str(json_t *o, const char *key, char *dst, size_t cap) {
    const char *s = json_string_value(json_object_get(o, key));
    snprintf(dst, cap, "%s", s ? s : "");
}

static char *dup_str(json_t *o, const char *key) {
    const char *s = json_string_value(json_object_get(o, key));
    return s ? strdup(s) : NULL;
}

static void timing_from_json(json_t *o, pk_timing *t) {
    t->median_us = num(o, "median_us");
    t->cv = num(o, "cv");
    t->min_us = num(o, "min_us");
    t->mean_us = num(o, "mean_us");
    t->iters = integer(o, "iters");
    t->warmup_iters = integer(o, "warmup_iters");
}

static void trial_from_json(json_t *o, pk_trial_verdict *t) {
    t->passed = json_is_true(json_object_get(o, "passed"));
    t->max_abs_err = num(o, "max_abs_err");
    t->max_rel_err = num(o, "max_rel_err");
    t->inputs_modified = json_is_true(json_object_get(o, "inputs_modified"));
    t->n_mismatch = integer(o, "n_mismatch");
    json_t *mm = json_object_get(o, "mismatch");
    size_t i;
    json_t *m;
    json_array_foreach(mm, i, m) {
        if (i >= PK_EVAL_MAX_RANKS)
            break;
        pk_rank_mismatch *x = &t->mismatch[i];
        x->rank = integer(m, "rank");
        copy_str(m, "arg", x->arg, sizeof x->arg);
        x->index = (long long)json_integer_value(json_object_get(m, "index"));
        x->expected = num(m, "expected");
        x->got = num(m, "got");
    }
    if (t->n_mismatch > PK_EVAL_MAX_RANKS)
        t->n_mismatch = PK_EVAL_MAX_RANKS;
}

int pk_eval_result_from_json(const char *json, pk_eval_result *r, pk_error *err) {
    json_error_t je;
    json_t *o = json_loads(json, 0, &je);
    if (!o || !json_is_object(o)) {
        json_decref(o);
        return pk_error_set(err, PK_ERR_INVALID, "eval result JSON: %s",
                            o ? "not an object" : je.text);
    }
    pk_eval_result_init(r);
    int st = pk_status_from_name(json_string_value(json_object_get(o, "status")) ?: "");
    if (st < 0) {
        json_decref(o);
        return pk_error_set(err, PK_ERR_INVALID, "eval result JSON: unknown status");
    }
    r->status = (pk_status)st;
    copy_str(o, "reason", r->reason, sizeof r->reason);
    copy_str(o, "rule", r->rule, sizeof r->rule);
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(o, "checks"), i, v) {
        const char *d = json_string_value(json_object_get(v, "detail"));
        pk_eval_result_add_check(r, json_string_value(json_object_get(v, "name")) ?: "",
                                 json_is_true(json_object_get(v, "passed")), "%s", d ? d : "");
    }
    json_array_foreach(json_object_get(o, "trials"), i, v) {
        if (r->n_trials >= PK_EVAL_MAX_TRIALS)
            break;
        trial_from_json(v, &r->trials[r->n_trials++]);
    }
    r->has_timing = json_is_true(json_object_get(o, "has_timing"));
    timing_from_json(json_object_get(o, "candidate"), &r->candidate);
    timing_from_json(json_object_get(o, "reference"), &r->reference);
    r->speedup = num(o, "speedup");
    if (json_object_get(o, "roofline_floor_us") || json_object_get(o, "roofline_no_overlap_us")) {
        r->roofline_floor_us = num(o, "roofline_floor_us");
        r->roofline_no_overlap_us = num(o, "roofline_no_overlap_us");
    } else {
        /* Results written before both figures existed hold one roofline_us: the sum of the
         * phases, which was also the floor then. Every problem of that time had one phase,
         * where the two figures are equal. */
        r->roofline_floor_us = r->roofline_no_overlap_us = num(o, "roofline_us");
    }
    r->trials_planned = integer(o, "trials_planned");
    json_t *b = json_object_get(o, "baseline");
    r->baseline.us = num(b, "us");
    r->baseline.cv = num(b, "cv");
    r->baseline.iters = integer(b, "iters");
    r->baseline.measured_at = num(b, "measured_at");
    const char *source = json_string_value(json_object_get(b, "source"));
    r->baseline.cached = source && strcmp(source, "cached") == 0;
    r->world_size = integer(o, "world_size");
    json_array_foreach(json_object_get(o, "hung_ranks"), i, v) {
        if (r->n_hung >= PK_EVAL_MAX_RANKS)
            break;
        r->hung_ranks[r->n_hung++] = (int)json_integer_value(v);
    }
    r->exit_code = integer(o, "exit_code");
    r->signal = integer(o, "signal");
    copy_str(o, "launcher", r->launcher, sizeof r->launcher);
    copy_str(o, "gpu_name", r->gpu_name, sizeof r->gpu_name);
    json_t *s = json_object_get(o, "stages");
    pk_stage_times *t = &r->stages;
    t->prepare_ms = num(s, "prepare_ms");
    t->compile_ms = num(s, "compile_ms");
    t->symbols_ms = num(s, "symbols_ms");
    t->run_ms = num(s, "run_ms");
    t->total_ms = num(s, "total_ms");
    t->run_setup_ms = num(s, "run_setup_ms");
    t->run_check_ms = num(s, "run_check_ms");
    t->run_timing_ms = num(s, "run_timing_ms");
    t->run_init_ms = num(s, "run_init_ms");
    t->run_arena_ms = num(s, "run_arena_ms");
    t->run_warm_ms = num(s, "run_warm_ms");
    t->run_verify_ms = num(s, "run_verify_ms");
    t->run_teardown_ms = num(s, "run_teardown_ms");
    t->run_lock_wait_ms = num(s, "run_lock_wait_ms");
    t->run_timing_expect_ms = num(s, "run_timing_expect_ms");
    t->run_timing_hold_ms = num(s, "run_timing_hold_ms");
    r->compile_log = dup_str(o, "compile_log");
    r->stdout_tail = dup_str(o, "stdout_tail");
    r->stderr_tail = dup_str(o, "stderr_tail");
    profile_from_json(json_object_get(o, "profile"), &r->profile);
    json_decref(o);
    return PK_OK;
}
