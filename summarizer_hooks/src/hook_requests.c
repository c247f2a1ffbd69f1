/* The JSON requests the three hooks get (schemas in docs/feedback.md). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "summarizer_internal.h"

static json_t *json_text(const char *s) {
    return s ? json_string(s) : json_null();
}

/* Output of the candidate, paths stripped (its text may not be valid UTF-8: then null). */
static json_t *json_clean(const char *s) {
    if (!s)
        return json_null();
    char *clean = pk_strip_sandbox_paths(s);
    json_t *v = clean ? json_string(clean) : NULL;
    free(clean);
    return v ? v : json_null();
}

static json_t *trials_json(const pk_eval_result *r) {
    json_t *trials = json_array();
    for (int i = 0; i < r->n_trials && i < PK_EVAL_MAX_TRIALS; i++) {
        const pk_trial_verdict *t = &r->trials[i];
        json_t *mm = json_array();
        for (int k = 0; k < t->n_mismatch && k < PK_EVAL_MAX_RANKS; k++) {
            const pk_rank_mismatch *m = &t->mismatch[k];
            json_array_append_new(mm, json_pack("{s:i, s:s, s:I, s:f, s:f}", "rank", m->rank, "arg",
                                                m->arg, "index", (json_int_t)m->index, "expected",
                                                m->expected, "got", m->got));
        }
        json_array_append_new(trials, json_pack("{s:b, s:f, s:f, s:b, s:o}", "passed", t->passed,
                                                "max_abs_err", t->max_abs_err, "max_rel_err",
                                                t->max_rel_err, "inputs_modified",
                                                t->inputs_modified, "mismatches", mm));
    }
    return trials;
}

static json_t *result_json(const pk_summarizer *s, const pk_eval_result *r) {
    json_t *o = json_object();
    json_object_set_new(o, "status", json_string(pk_status_name(r->status)));
    json_object_set_new(o, "reason", json_clean(r->reason));
    json_object_set_new(o, "rule", json_string(r->rule));
    json_object_set_new(o, "world_size", json_integer(r->world_size));
    json_t *hung = json_array();
    for (int i = 0; i < r->n_hung && i < PK_EVAL_MAX_RANKS; i++)
        json_array_append_new(hung, json_integer(r->hung_ranks[i]));
    json_object_set_new(o, "hung_ranks", hung);
    json_object_set_new(o, "exit_code", json_integer(r->exit_code));
    json_object_set_new(o, "signal", json_integer(r->signal));
    json_t *checks = json_array();
    for (int i = 0; i < r->n_checks && i < PK_EVAL_MAX_CHECKS; i++) {
        json_array_append_new(checks, json_pack("{s:s, s:b, s:o}", "name", r->checks[i].name,
                                                "passed", r->checks[i].passed, "detail",
                                                json_clean(r->checks[i].detail)));
    }
    json_object_set_new(o, "checks", checks);
    json_object_set_new(o, "trials", trials_json(r));
    json_object_set_new(o, "trials_planned", json_integer(r->trials_planned));
    if (r->has_timing) {
        /* The baseline the speedup used: a cached one leaves the reference untimed (0). */
        int cached = r->baseline.us > 0 && r->baseline.cached;
        double base = r->baseline.us > 0 ? r->baseline.us : r->reference.median_us;
        double base_cv = r->baseline.us > 0 ? r->baseline.cv : r->reference.cv;
        json_object_set_new(o, "timing",
                            json_pack("{s:f, s:f, s:f, s:f, s:f, s:f, s:f, s:s}", "time_us",
                                      r->candidate.median_us, "baseline_us", base, "speedup",
                                      r->speedup, "roofline_floor_us", r->roofline_floor_us,
                                      "roofline_no_overlap_us", r->roofline_no_overlap_us, "cv",
                                      r->candidate.cv, "baseline_cv", base_cv, "baseline_source",
                                      cached ? "cached" : "measured"));
    }
    char *log = r->compile_log
                    ? pk_condense_compile_log(r->compile_log, (size_t)s->opt.compile_log_chars)
                    : NULL;
    json_object_set_new(o, "compile_log", json_text(log));
    free(log);
    json_object_set_new(o, "stderr_tail", json_clean(r->stderr_tail));
    json_object_set_new(o, "stdout_tail", json_clean(r->stdout_tail));
    return o;
}

char *pk_feedback_hook(pk_summarizer *s, const pk_eval_result *r, const char *builtin) {
    json_t *req = json_object();
    json_object_set_new(req, "result", result_json(s, r));
    json_object_set_new(req, "entry", json_text(s->entry));
    return pk_hook_call(s, PK_HOOK_FEEDBACK, req, builtin);
}

int pk_summarize_hook(pk_summarizer *s, const char *action, const char *summary_field,
                      pk_parsed_action *out, pk_error *err) {
    json_t *req = json_object();
    json_object_set_new(req, "action", json_string(action));
    json_object_set_new(req, "code", json_string(out->code));
    json_object_set_new(req, "summary_field", json_text(summary_field));
    char *text = pk_hook_call(s, PK_HOOK_SUMMARIZE, req, out->summary);
    if (!text)
        return PK_OK;
    char *trimmed = pk_strndup_trim(text, strlen(text));
    free(text);
    if (trimmed && !trimmed[0]) {
        pk_hook_record_failure(s, PK_HOOK_SUMMARIZE, "answered with an empty summary");
    } else if (trimmed) {
        char *capped = pk_text_cap(trimmed, (size_t)s->opt.summary_chars);
        if (!capped) {
            free(trimmed);
            return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
        }
        free(out->summary);
        out->summary = capped;
    }
    free(trimmed);
    return PK_OK;
}

char *pk_history_hook(pk_summarizer *s, const char *task, const pk_turn *turns, int n,
                      const char *builtin) {
    json_t *arr = json_array();
    for (int i = 0; i < n; i++) {
        json_array_append_new(arr, json_pack("{s:i, s:o, s:o, s:o}", "turn", turns[i].turn, "code",
                                             json_text(turns[i].code), "summary",
                                             json_text(turns[i].summary), "feedback",
                                             json_text(turns[i].feedback)));
    }
    json_t *req = json_object();
    json_object_set_new(req, "task_prompt", json_string(task));
    json_object_set_new(req, "turns", arr);
    json_object_set_new(req, "budget_chars", json_integer(s->opt.budget_chars));
    json_object_set_new(req, "budget_tokens", json_integer(s->opt.budget_tokens));
    json_object_set_new(req, "continue", json_string(s->tpl.text[PK_TPL_CONTINUE]));
    char *text = pk_hook_call(s, PK_HOOK_HISTORY, req, builtin);
    if (text && !pk_summarizer_fits(s, text)) {
        char what[160];
        snprintf(what, sizeof what, "its prompt (%zu chars, ~%zu tokens) exceeds the budget",
                 strlen(text), pk_approx_tokens(text));
        pk_hook_record_failure(s, PK_HOOK_HISTORY, what);
        free(text);
        return NULL;
    }
    return text;
}
