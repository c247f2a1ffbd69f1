/* The built-in feedback for each of the seven outcomes, rendered from the templates. */
#define _GNU_SOURCE /* sigabbrev_np */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "summarizer_internal.h"

typedef char pk_num[32];

static int render_to(pk_strbuf *out, const pk_summarizer *s, pk_tpl_id id,
                     const char *const *vars) {
    return pk_template_render(out, s->tpl.text[id], vars);
}

static char *render_string(const pk_summarizer *s, pk_tpl_id id, const char *const *vars) {
    pk_strbuf sb = {0};
    if (render_to(&sb, s, id, vars) != PK_OK) {
        pk_strbuf_free(&sb);
        return NULL;
    }
    return pk_strbuf_take(&sb);
}

static const char *nonempty(const char *s, const char *fallback) {
    return s && s[0] ? s : fallback;
}

static char *fb_compile_error(const pk_summarizer *s, const pk_eval_result *r) {
    char *log = r->compile_log && r->compile_log[0]
                    ? pk_condense_compile_log(r->compile_log, (size_t)s->opt.compile_log_chars)
                    : strdup(nonempty(r->reason, "(the compiler printed nothing)"));
    if (!log)
        return NULL;
    const char *vars[] = {"log", log, NULL};
    char *text = render_string(s, PK_TPL_FB_COMPILE_ERROR, vars);
    free(log);
    return text;
}

/* The tail of the candidate's stderr: its last lines are usually the CUDA error. */
static char *output_tail(const pk_summarizer *s, const pk_eval_result *r) {
    const char *src = r->stderr_tail && r->stderr_tail[0] ? r->stderr_tail : "";
    char *clean = pk_strip_sandbox_paths(src);
    if (!clean)
        return NULL;
    size_t len = strlen(clean), max = (size_t)s->opt.stderr_chars;
    if (len > max) {
        size_t start = len - max;
        while (start < len && ((unsigned char)clean[start] & 0xC0) == 0x80)
            start++;
        char *tail = pk_strndup_trim(clean + start, len - start);
        free(clean);
        if (!tail)
            return NULL;
        pk_strbuf sb = {0};
        pk_strbuf_printf(&sb, "stderr (last part):\n...%s", tail);
        free(tail);
        return pk_strbuf_take(&sb);
    }
    char *trimmed = pk_strndup_trim(clean, len);
    free(clean);
    if (!trimmed || !trimmed[0])
        return trimmed;
    pk_strbuf sb = {0};
    pk_strbuf_printf(&sb, "stderr:\n%s", trimmed);
    free(trimmed);
    return pk_strbuf_take(&sb);
}

static char *fb_runtime_error(const pk_summarizer *s, const pk_eval_result *r) {
    char exit_text[96] = "";
    if (r->signal > 0) {
        const char *name = sigabbrev_np(r->signal);
        snprintf(exit_text, sizeof exit_text, " (killed by signal %d%s%s)", r->signal,
                 name ? ", SIG" : "", name ? name : "");
    } else if (r->exit_code != 0) {
        snprintf(exit_text, sizeof exit_text, " (exit code %d)", r->exit_code);
    }
    char *output = output_tail(s, r);
    if (!output)
        return NULL;
    const char *vars[] = {
        "reason", nonempty(r->reason, "the run failed"), "exit", exit_text, "output", output, NULL};
    char *text = render_string(s, PK_TPL_FB_RUNTIME_ERROR, vars);
    free(output);
    return text;
}

/* The harness's reason is one clause ("rank 1 of 2 did not finish within the 3000 ms run limit
 * (stopped after 3023 ms; rank 0: done; rank 1: candidate, trial 1)"), quoted as it is, without
 * a final period; without one, the clause is built from the hung ranks. */
static char *fb_timeout(const pk_summarizer *s, const pk_eval_result *r) {
    pk_strbuf ranks = {0}, what = {0};
    for (int i = 0; i < r->n_hung && i < PK_EVAL_MAX_RANKS; i++)
        pk_strbuf_printf(&ranks, "%s%d", i ? ", " : "", r->hung_ranks[i]);
    pk_num world;
    if (r->world_size > 0) {
        snprintf(world, sizeof world, "%d", r->world_size);
    } else {
        snprintf(world, sizeof world, "?"); /* e.g. cancelled before the run started */
    }
    if (r->reason[0]) {
        size_t n = strlen(r->reason);
        while (n > 0 && (r->reason[n - 1] == '.' || r->reason[n - 1] == ' '))
            n--;
        pk_strbuf_append(&what, r->reason, n);
    } else if (ranks.len) {
        pk_strbuf_printf(&what, "rank%s %s of %s did not finish within the run's time limit",
                         r->n_hung == 1 ? "" : "s", ranks.data, world);
    } else {
        pk_strbuf_puts(&what, "the run did not finish within its time limit");
    }
    const char *vars[] = {"ranks",      ranks.data ? ranks.data : "(not recorded)",
                          "world_size", world,
                          "reason",     what.data ? what.data : "",
                          NULL};
    char *text = render_string(s, PK_TPL_FB_TIMEOUT, vars);
    pk_strbuf_free(&ranks);
    pk_strbuf_free(&what);
    return text;
}

/* What happened to the trials other than the first failing one (1-based `first`): the
 * harness stops at the first failure, so the later ones were usually not run. */
static void other_trials(int first, int n_run, int n_planned, int n_failed, pk_strbuf *out) {
    if (n_failed > 1) {
        pk_strbuf_printf(out, "; %d of the %d trials failed", n_failed, n_run);
        return;
    }
    if (first == 2)
        pk_strbuf_puts(out, "; trial 1 passed");
    else if (first == 3)
        pk_strbuf_puts(out, "; trials 1 and 2 passed");
    else if (first > 3)
        pk_strbuf_printf(out, "; trials 1 to %d passed", first - 1);
    if (n_run < n_planned)
        pk_strbuf_puts(out, first > 1 ? ", the rest were not run" : "; the rest were not run");
    else if (first < n_run)
        pk_strbuf_puts(out, first > 1 ? ", the later ones passed" : "; the others passed");
}

/* Trial, errors, first mismatch (rank, output, index, expected vs got), other failing ranks. */
static int incorrect_details(const pk_summarizer *s, const pk_eval_result *r, pk_strbuf *out) {
    int first = -1, n_failed = 0, n_trials = r->n_trials;
    if (n_trials > PK_EVAL_MAX_TRIALS)
        n_trials = PK_EVAL_MAX_TRIALS;
    for (int i = 0; i < n_trials; i++) {
        if (!r->trials[i].passed) {
            n_failed++;
            first = first < 0 ? i : first;
        }
    }
    if (first < 0)
        return pk_strbuf_puts(out, nonempty(r->reason, "the output did not match"));
    const pk_trial_verdict *t = &r->trials[first];
    /* "of N" counts the trials configured, not those that ran (the run stops at a failure). */
    int planned = r->trials_planned > n_trials ? r->trials_planned : n_trials;
    pk_num trial, total, failed, max_abs, max_rel;
    snprintf(trial, sizeof trial, "%d", first + 1);
    snprintf(total, sizeof total, "%d", planned);
    snprintf(failed, sizeof failed, "%d", n_failed);
    snprintf(max_abs, sizeof max_abs, "%.4g", t->max_abs_err);
    snprintf(max_rel, sizeof max_rel, "%.4g", t->max_rel_err);
    pk_strbuf others = {0};
    other_trials(first + 1, n_trials, planned, n_failed, &others);
    const char *tv[] = {"trial",    trial,   "n_trials", total,
                        "n_failed", failed,  "others",   others.data ? others.data : "",
                        "max_abs",  max_abs, "max_rel",  max_rel,
                        NULL};
    int rc = render_to(out, s, PK_TPL_FRAG_TRIAL, tv);
    pk_strbuf_free(&others);
    int n_mm = t->n_mismatch < PK_EVAL_MAX_RANKS ? t->n_mismatch : PK_EVAL_MAX_RANKS;
    if (rc == PK_OK && n_mm > 0 && t->mismatch[0].index >= 0) {
        const pk_rank_mismatch *m = &t->mismatch[0];
        pk_num rank, index, expected, got;
        snprintf(rank, sizeof rank, "%d", m->rank);
        snprintf(index, sizeof index, "%lld", m->index);
        snprintf(expected, sizeof expected, "%.6g", m->expected);
        snprintf(got, sizeof got, "%.6g", m->got);
        const char *mv[] = {"rank",  rank,  "arg",      nonempty(m->arg, "output"),
                            "index", index, "expected", expected,
                            "got",   got,   NULL};
        rc = render_to(out, s, PK_TPL_FRAG_MISMATCH, mv);
    } else if (rc == PK_OK && n_mm > 0 && r->reason[0]) {
        /* No element to name: the output failed as a whole (the norm-wise check) */
        pk_strbuf_printf(out, " %s.", r->reason);
    }
    if (rc == PK_OK && n_mm > 1) {
        pk_strbuf ranks = {0};
        for (int i = 1; i < n_mm; i++)
            pk_strbuf_printf(&ranks, "%s%d", i > 1 ? ", " : "", t->mismatch[i].rank);
        const char *rv[] = {"ranks", ranks.data ? ranks.data : "", NULL};
        rc = render_to(out, s, PK_TPL_FRAG_OTHER_RANKS, rv);
        pk_strbuf_free(&ranks);
    }
    if (rc == PK_OK && t->inputs_modified)
        rc = render_to(out, s, PK_TPL_FRAG_INPUTS_MODIFIED, NULL);
    return rc;
}

static char *fb_incorrect(const pk_summarizer *s, const pk_eval_result *r) {
    pk_strbuf details = {0};
    if (incorrect_details(s, r, &details) != PK_OK) {
        pk_strbuf_free(&details);
        return NULL;
    }
    const char *vars[] = {"details", details.data ? details.data : "", NULL};
    char *text = render_string(s, PK_TPL_FB_INCORRECT, vars);
    pk_strbuf_free(&details);
    return text;
}

static char *fb_correct(const pk_summarizer *s, const pk_eval_result *r) {
    if (!r->has_timing || r->candidate.median_us <= 0)
        return render_string(s, PK_TPL_FB_CORRECT_UNTIMED, NULL);
    pk_num time_us, base_us, speedup, percent, no_overlap_us, floor_us;
    double cand = r->candidate.median_us;
    snprintf(time_us, sizeof time_us, "%.1f", cand);
    /* The baseline the speedup used: a cached one leaves the reference untimed (0). */
    double base = r->baseline.us > 0 ? r->baseline.us : r->reference.median_us;
    snprintf(base_us, sizeof base_us, "%.1f", base);
    snprintf(speedup, sizeof speedup, "%.2f", r->speedup);
    pk_strbuf roofline = {0};
    if (r->roofline_no_overlap_us > 0 && r->roofline_floor_us > 0) {
        snprintf(percent, sizeof percent, "%.1f", 100.0 * r->roofline_no_overlap_us / cand);
        snprintf(no_overlap_us, sizeof no_overlap_us, "%.1f", r->roofline_no_overlap_us);
        snprintf(floor_us, sizeof floor_us, "%.1f", r->roofline_floor_us);
        const char *rv[] = {"percent", percent, "no_overlap_us", no_overlap_us, "floor_us",
                            floor_us,  NULL};
        render_to(&roofline, s, PK_TPL_FRAG_ROOFLINE, rv);
    }
    const char *vars[] = {"time_us", time_us, "baseline_us", base_us,
                          "speedup", speedup, "roofline",    roofline.data ? roofline.data : "",
                          NULL};
    char *text = render_string(s, PK_TPL_FB_CORRECT, vars);
    pk_strbuf_free(&roofline);
    return text;
}

/* The profile stage's lines after a correct verdict (docs/feedback.md, "Profiles"): its text,
 * or one line saying why there is none; nothing when no profile was asked for. */
static char *with_profile(char *text, const pk_eval_result *r) {
    const pk_profile_result *p = &r->profile;
    if (!text || p->level <= 0 || !p->status[0])
        return text;
    pk_strbuf sb = {0};
    pk_strbuf_puts(&sb, text);
    if (p->text && p->text[0])
        pk_strbuf_printf(&sb, "\n\n%s", p->text);
    if (!strcmp(p->status, "partial") || !strcmp(p->status, "error"))
        pk_strbuf_printf(&sb, "\n(Profiler trouble, on our side, not your kernel's: %.240s)",
                         p->reason);
    else if (!strcmp(p->status, "skipped") && !strncmp(p->reason, "budget", 6))
        pk_strbuf_puts(&sb, "\n\nProfile: skipped this turn (the server's profile budget).");
    free(text);
    return pk_strbuf_take(&sb);
}

char *pk_builtin_feedback(const pk_summarizer *s, const pk_eval_result *r) {
    char *text = NULL;
    switch (r->status) {
    case PK_STATUS_FORMAT_ERROR: {
        const char *vars[] = {"reason", nonempty(r->reason, "no code block"), NULL};
        text = render_string(s, PK_TPL_FB_FORMAT_ERROR, vars);
        break;
    }
    case PK_STATUS_REJECTED: {
        const char *vars[] = {"rule", nonempty(r->rule, "unnamed"), "reason",
                              nonempty(r->reason, "(no detail)"), NULL};
        text = render_string(s, PK_TPL_FB_REJECTED, vars);
        break;
    }
    case PK_STATUS_COMPILE_ERROR:
        text = fb_compile_error(s, r);
        break;
    case PK_STATUS_RUNTIME_ERROR:
        text = fb_runtime_error(s, r);
        break;
    case PK_STATUS_TIMEOUT:
        text = fb_timeout(s, r);
        break;
    case PK_STATUS_INCORRECT:
        text = fb_incorrect(s, r);
        break;
    case PK_STATUS_CORRECT:
        text = with_profile(fb_correct(s, r), r);
        break;
    default: {
        pk_strbuf sb = {0};
        pk_strbuf_printf(&sb, "The evaluation ended with an unknown status (%d): %s",
                         (int)r->status, r->reason);
        text = pk_strbuf_take(&sb);
        break;
    }
    }
    if (!text)
        return NULL;
    /* Templates with an empty tail field leave trailing blank lines and spaces. */
    char *trimmed = pk_strndup_trim(text, strlen(text));
    free(text);
    return trimmed;
}
