/* The evaluation report: metrics (reward/include/pk_metrics.h) per problem and overall, as
 * JSON and Markdown, and the best-so-far-by-turn chart as SVG. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pk_eval_internal.h"
#include "pk_metrics.h"

typedef struct problem_metrics {
    int n, errors, n_correct;
    int noisy_turns; /* correct, timed turns whose candidate or baseline CV > --noisy-cv */
    int noisy_best;  /* trajectories whose best speedup comes from such a turn */
    double correct_rate, best_speedup, mean_best_speedup, fast_1, fast_15;
    double pass[PK_EVAL_MAX_K], best[PK_EVAL_MAX_K], avg[PK_EVAL_MAX_K];
    int has_k[PK_EVAL_MAX_K]; /* k <= n */
    double *best_so_far;      /* T values */
    int status_count[PK_STATUS_COUNT];
    int infra_dropped; /* trajectories stopped by infra_error, left out of every figure */
} problem_metrics;

/* Borrowed views of one problem's trajectories that ran at least one turn. */
typedef struct views {
    pk_trajectory *traj;
    pk_status *status;
    double *speedup;
    int n;
} views;

/* A trajectory stopped by infra_error (the server's failure, not the model's) is in no
 * figure: only in infra_dropped. */
static int build_views(const pk_eval_run *run, int p, views *v, int *errors, int *infra) {
    int T = run->args->turns, n = 0;
    *errors = 0;
    *infra = 0;
    for (int i = 0; i < run->n_trajs; i++)
        n += run->trajs[i].problem == p;
    memset(v, 0, sizeof *v);
    v->traj = calloc((size_t)n + 1, sizeof *v->traj);
    v->status = calloc((size_t)n * (size_t)T + 1, sizeof *v->status);
    v->speedup = calloc((size_t)n * (size_t)T + 1, sizeof *v->speedup);
    if (!v->traj || !v->status || !v->speedup)
        return -1;
    for (int i = 0; i < run->n_trajs; i++) {
        const pk_eval_traj *t = &run->trajs[i];
        if (t->problem != p)
            continue;
        *infra += t->infra;
        if (t->infra)
            continue;
        *errors += t->error != NULL;
        if (t->n_turns == 0)
            continue;
        pk_status *st = v->status + (size_t)v->n * (size_t)T;
        double *sp = v->speedup + (size_t)v->n * (size_t)T;
        for (int k = 0; k < t->n_turns; k++) {
            st[k] = (pk_status)t->turns[k].status;
            sp[k] = t->turns[k].speedup;
        }
        v->traj[v->n++] = (pk_trajectory){.n_turns = t->n_turns, .status = st, .speedup = sp};
    }
    return 0;
}

static void free_views(views *v) {
    free(v->traj);
    free(v->status);
    free(v->speedup);
}

/* Counts the noisy speedups of problem p, and the trajectories whose best one is noisy. */
static void count_noisy(const pk_eval_run *run, int p, problem_metrics *m) {
    for (int i = 0; i < run->n_trajs; i++) {
        const pk_eval_traj *t = &run->trajs[i];
        if (t->problem != p)
            continue;
        int best = -1;
        for (int k = 0; k < t->n_turns; k++) {
            const pk_eval_turn *u = &t->turns[k];
            if (u->status != PK_STATUS_CORRECT || !(u->speedup > 0))
                continue;
            m->noisy_turns += u->noisy;
            if (best < 0 || u->speedup > t->turns[best].speedup)
                best = k;
        }
        m->noisy_best += best >= 0 && t->turns[best].noisy;
    }
}

static int problem_metrics_compute(const pk_eval_run *run, int p, problem_metrics *m,
                                   pk_error *err) {
    const pk_eval_args *a = run->args;
    views v;
    memset(&v, 0, sizeof v);
    memset(m, 0, sizeof *m);
    m->best_so_far = calloc((size_t)a->turns, sizeof *m->best_so_far);
    if (!m->best_so_far || build_views(run, p, &v, &m->errors, &m->infra_dropped)) {
        free_views(&v);
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    }
    m->n = v.n;
    count_noisy(run, p, m);
    double *best = calloc((size_t)v.n + 1, sizeof *best);
    int rc = best ? PK_OK : pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    for (int i = 0; !rc && i < v.n; i++) {
        best[i] = pk_traj_best_speedup(&v.traj[i]);
        m->n_correct += pk_traj_correct(&v.traj[i]);
        m->fast_1 += pk_traj_fast_p(&v.traj[i], 1.0);
        m->fast_15 += pk_traj_fast_p(&v.traj[i], 1.5);
        m->mean_best_speedup += best[i];
        if (best[i] > m->best_speedup)
            m->best_speedup = best[i];
        for (int k = 0; k < v.traj[i].n_turns; k++)
            m->status_count[v.traj[i].status[k]]++;
    }
    if (!rc && v.n > 0) {
        m->correct_rate = (double)m->n_correct / v.n;
        m->fast_1 /= v.n;
        m->fast_15 /= v.n;
        m->mean_best_speedup /= v.n;
        rc = pk_best_so_far(v.traj, v.n, a->turns, m->best_so_far, err);
        for (int j = 0; !rc && j < a->n_k; j++) {
            if (a->k[j] > v.n)
                continue;
            m->has_k[j] = 1;
            rc = pk_pass_at_k(v.n, m->n_correct, a->k[j], &m->pass[j], err);
            if (!rc)
                rc = pk_best_at_k(best, v.n, a->k[j], &m->best[j], err);
            if (!rc)
                rc = pk_avg_at_k(best, v.n, a->k[j], &m->avg[j], err);
        }
    }
    free(best);
    free_views(&v);
    return rc;
}

static json_t *at_k_json(const pk_eval_args *a, const double *vals, const int *has) {
    json_t *o = json_object();
    for (int j = 0; o && j < a->n_k; j++) {
        char key[16];
        snprintf(key, sizeof key, "%d", a->k[j]);
        json_object_set_new(o, key, has[j] ? json_real(vals[j]) : json_null());
    }
    return o;
}

static json_t *series_json(const double *v, int n) {
    json_t *arr = json_array();
    for (int i = 0; arr && i < n; i++)
        json_array_append_new(arr, json_real(v[i]));
    return arr;
}

static json_t *metrics_json(const pk_eval_args *a, const problem_metrics *m) {
    json_t *o = json_pack("{s:i, s:i, s:i, s:f, s:f, s:f, s:f, s:f, s:i, s:i}", "trajectories",
                          m->n, "errors", m->errors, "correct", m->n_correct, "correct_rate",
                          m->correct_rate, "best_speedup", m->best_speedup, "mean_best_speedup",
                          m->mean_best_speedup, "fast_1", m->fast_1, "fast_1.5", m->fast_15,
                          "noisy_speedups", m->noisy_turns, "noisy_best_speedups", m->noisy_best);
    if (!o)
        return NULL;
    json_object_set_new(o, "infra_dropped", json_integer(m->infra_dropped));
    json_object_set_new(o, "pass@k", at_k_json(a, m->pass, m->has_k));
    json_object_set_new(o, "best@k", at_k_json(a, m->best, m->has_k));
    json_object_set_new(o, "avg@k", at_k_json(a, m->avg, m->has_k));
    json_object_set_new(o, "best_so_far_by_turn", series_json(m->best_so_far, a->turns));
    json_t *counts = json_object();
    for (int s = 0; counts && s < PK_STATUS_COUNT; s++)
        if (m->status_count[s])
            json_object_set_new(counts, pk_status_name((pk_status)s),
                                json_integer(m->status_count[s]));
    json_object_set_new(o, "turn_status_counts", counts);
    return o;
}

/* Mean over problems that ran (n > 0); at-k values over problems where k <= n. */
static void overall_compute(const pk_eval_args *a, const problem_metrics *pm, int np,
                            problem_metrics *o) {
    int used = 0, used_k[PK_EVAL_MAX_K] = {0};
    for (int p = 0; p < np; p++) {
        o->errors += pm[p].errors;
        o->infra_dropped += pm[p].infra_dropped;
        o->noisy_turns += pm[p].noisy_turns;
        o->noisy_best += pm[p].noisy_best;
        if (pm[p].n == 0)
            continue;
        used++;
        o->n += pm[p].n;
        o->n_correct += pm[p].n_correct;
        o->correct_rate += pm[p].correct_rate;
        o->mean_best_speedup += pm[p].mean_best_speedup;
        o->fast_1 += pm[p].fast_1;
        o->fast_15 += pm[p].fast_15;
        if (pm[p].best_speedup > o->best_speedup)
            o->best_speedup = pm[p].best_speedup;
        for (int t = 0; t < a->turns; t++)
            o->best_so_far[t] += pm[p].best_so_far[t];
        for (int j = 0; j < a->n_k; j++) {
            if (!pm[p].has_k[j])
                continue;
            used_k[j]++;
            o->pass[j] += pm[p].pass[j];
            o->best[j] += pm[p].best[j];
            o->avg[j] += pm[p].avg[j];
        }
        for (int s = 0; s < PK_STATUS_COUNT; s++)
            o->status_count[s] += pm[p].status_count[s];
    }
    if (used) {
        o->correct_rate /= used;
        o->mean_best_speedup /= used;
        o->fast_1 /= used;
        o->fast_15 /= used;
        for (int t = 0; t < a->turns; t++)
            o->best_so_far[t] /= used;
    }
    for (int j = 0; j < a->n_k; j++) {
        o->has_k[j] = used_k[j] > 0;
        if (used_k[j]) {
            o->pass[j] /= used_k[j];
            o->best[j] /= used_k[j];
            o->avg[j] /= used_k[j];
        }
    }
}

static json_t *trajectories_json(const pk_eval_run *run) {
    json_t *arr = json_array();
    for (int i = 0; arr && i < run->n_trajs; i++) {
        const pk_eval_traj *t = &run->trajs[i];
        json_t *turns = json_array(), *rets = t->returns ? json_array() : json_null();
        for (int k = 0; turns && k < t->n_turns; k++) {
            const pk_eval_turn *u = &t->turns[k];
            json_t *turn = json_pack(
                "{s:i, s:s, s:f, s:f, s:f, s:f, s:s, s:b, s:o}", "turn", k + 1, "status",
                pk_status_name((pk_status)u->status), "speedup", u->speedup, "reward", u->reward,
                "time_cv", u->time_cv, "baseline_cv", u->baseline_cv, "baseline_source",
                !(u->speedup > 0)    ? "none"
                : u->baseline_cached ? "cached"
                                     : "measured",
                "noisy", u->noisy, "gpu", u->gpu[0] ? json_string(u->gpu) : json_null());
            if (turn && u->profile_status[0]) {
                char svg[300];
                pk_eval_profile_svg_name(run, i, k, svg, sizeof svg);
                json_object_set_new(turn, "profile",
                                    json_pack("{s:s, s:f, s:o}", "status", u->profile_status,
                                              "cost_s", u->profile_cost_s, "svg",
                                              u->profile_raw ? json_string(svg) : json_null()));
            }
            json_array_append_new(turns, turn);
        }
        for (int k = 0; t->returns && rets && k < t->n_turns; k++)
            json_array_append_new(rets, json_real(t->returns[k]));
        json_array_append_new(arr,
                              json_pack("{s:s, s:i, s:s?, s:s?, s:o, s:o, s:o, s:s?, s:b, s:b}",
                                        "problem", run->problems[t->problem].id, "trajectory",
                                        t->index, "episode", t->episode, "group", t->group, "seed",
                                        t->seed >= 0 ? json_integer(t->seed) : json_null(), "turns",
                                        turns, "returns", rets, "error", t->error, "policy_ended",
                                        t->policy_ended, "infra_error", t->infra));
    }
    return arr;
}

static void md_at_k_header(pk_strbuf *md, const pk_eval_args *a) {
    for (int j = 0; j < a->n_k; j++)
        pk_strbuf_printf(md, " pass@%d | best@%d | avg@%d |", a->k[j], a->k[j], a->k[j]);
}

static void md_row(pk_strbuf *md, const pk_eval_args *a, const char *name,
                   const problem_metrics *m) {
    pk_strbuf_printf(md, "| %s | %d | %.0f%% | %.3fx | %.3fx | %.0f%% | %.0f%% |", name, m->n,
                     100 * m->correct_rate, m->best_speedup, m->mean_best_speedup, 100 * m->fast_1,
                     100 * m->fast_15);
    for (int j = 0; j < a->n_k; j++) {
        if (m->has_k[j])
            pk_strbuf_printf(md, " %.3f | %.3fx | %.3fx |", m->pass[j], m->best[j], m->avg[j]);
        else
            pk_strbuf_puts(md, " - | - | - |");
    }
    pk_strbuf_printf(md, " %d |\n", m->errors);
}

static char *markdown(const pk_eval_run *run, const problem_metrics *pm,
                      const problem_metrics *overall) {
    const pk_eval_args *a = run->args;
    pk_strbuf md = {0};
    int ran = 0;
    for (int p = 0; p < run->n_problems; p++)
        ran += !run->problems[p].skipped;
    pk_strbuf_printf(&md,
                     "# pkgym eval %s\n\n%d problem%s x %d trajectories x %d turns, policy `%s`: "
                     "%d steps in %.1f s (%.2f steps/s).",
                     a->run_id, ran, ran == 1 ? "" : "s", a->trajectories, a->turns, a->policy,
                     run->steps, run->wall_s, run->wall_s > 0 ? run->steps / run->wall_s : 0.0);
    if (ran < run->n_problems)
        pk_strbuf_printf(&md, " %d selected problem%s left out (below).", run->n_problems - ran,
                         run->n_problems - ran == 1 ? " was" : "s were");
    pk_strbuf_printf(&md, "\nEpisodes are grouped as `%s/<problem>`.",
                     a->group ? a->group : a->run_id);
    if (run->store[0])
        pk_strbuf_printf(&md, " Trajectory store (kept): `%s`.", run->store);
    pk_strbuf_puts(&md, "\n\n");
    pk_strbuf_puts(&md, "| problem | trajectories | correct | best speedup | mean best | fast_1 "
                        "| fast_1.5 |");
    md_at_k_header(&md, a);
    pk_strbuf_puts(&md, " errors |\n|---|---|---|---|---|---|---|");
    for (int j = 0; j < a->n_k; j++)
        pk_strbuf_puts(&md, "---|---|---|");
    pk_strbuf_puts(&md, "---|\n");
    for (int p = 0; p < run->n_problems; p++)
        if (!run->problems[p].skipped)
            md_row(&md, a, run->problems[p].id, &pm[p]);
    md_row(&md, a, "**overall** (mean over the problems that ran)", overall);
    if (overall->infra_dropped)
        pk_strbuf_printf(&md,
                         "\n%d trajector%s stopped on `infra_error` (the server failed before the "
                         "candidate's code was loaded, twice: not the model's failure) and %s "
                         "left out of every figure above.\n",
                         overall->infra_dropped, overall->infra_dropped == 1 ? "y" : "ies",
                         overall->infra_dropped == 1 ? "is" : "are");
    if (overall->noisy_best) {
        pk_strbuf_printf(&md,
                         "\n**Noisy speedups:** %d best speedup%s (of %d noisy speedups in all) "
                         "come from timings whose candidate or baseline CV is above %g; the "
                         "best and mean best figures above include them:",
                         overall->noisy_best, overall->noisy_best == 1 ? "" : "s",
                         overall->noisy_turns, a->noisy_cv);
        for (int p = 0; p < run->n_problems; p++)
            if (!run->problems[p].skipped && pm[p].noisy_best)
                pk_strbuf_printf(&md, " %s %d of %d,", run->problems[p].id, pm[p].noisy_best,
                                 pm[p].n);
        if (md.data[md.len - 1] == ',')
            md.data[--md.len] = 0;
        pk_strbuf_puts(&md, ". Per turn: `noisy`, `time_cv`, `baseline_cv` in report.json.\n");
    }
    if (ran < run->n_problems) {
        pk_strbuf_puts(&md, "\nLeft out:\n\n");
        for (int p = 0; p < run->n_problems; p++)
            if (run->problems[p].skipped)
                pk_strbuf_printf(&md, "- %s: %s\n", run->problems[p].id, run->problems[p].reason);
    }
    md_row(&md, a, "**overall** (mean over problems)", overall);
    pk_eval_roofline_markdown(&md, run);
    pk_strbuf_puts(&md, "\nBest speedup so far by turn (mean over problems; 0 for trajectories "
                        "with no correct turn yet):\n\n| turn |");
    for (int t = 0; t < a->turns; t++)
        pk_strbuf_printf(&md, " %d |", t + 1);
    pk_strbuf_puts(&md, "\n|---|");
    for (int t = 0; t < a->turns; t++)
        pk_strbuf_puts(&md, "---|");
    pk_strbuf_puts(&md, "\n| best so far |");
    for (int t = 0; t < a->turns; t++)
        pk_strbuf_printf(&md, " %.3fx |", overall->best_so_far[t]);
    pk_strbuf_puts(&md, "\n\nTurn outcomes:");
    for (int s = 0; s < PK_STATUS_COUNT; s++)
        if (overall->status_count[s])
            pk_strbuf_printf(&md, " %s %d,", pk_status_name((pk_status)s),
                             overall->status_count[s]);
    if (md.len && md.data[md.len - 1] == ',')
        md.data[--md.len] = 0;
    pk_strbuf_puts(&md, ".\n");
    pk_eval_gpu_models_md(run, &md);
    pk_strbuf_puts(&md, "\nThe chart: `turn_scaling.svg`; every turn: `report.json`.\n");
    return pk_strbuf_take(&md);
}

static int write_text(const char *dir, const char *name, const char *text, pk_error *err) {
    char *path = pk_path_join(dir, name);
    if (!path)
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    int rc = pk_write_file(path, text, strlen(text), err);
    free(path);
    return rc;
}

static json_t *report_json(const pk_eval_run *run, const problem_metrics *pm,
                           const problem_metrics *overall) {
    const pk_eval_args *a = run->args;
    char date[32];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    json_t *ks = json_array(), *problems = json_array();
    for (int j = 0; ks && j < a->n_k; j++)
        json_array_append_new(ks, json_integer(a->k[j]));
    int ran = 0;
    for (int p = 0; problems && p < run->n_problems; p++) {
        json_t *o = run->problems[p].skipped ? json_object() : metrics_json(a, &pm[p]);
        ran += !run->problems[p].skipped;
        json_object_set_new(o, "id", json_string(run->problems[p].id));
        json_object_set_new(o, "world_size", json_integer(run->problems[p].world_size));
        json_object_set_new(o, "skipped", json_boolean(run->problems[p].skipped));
        json_object_set_new(o, "roofline", pk_eval_roofline_json(run, p));
        if (run->problems[p].skipped)
            json_object_set_new(o, "reason", json_string(run->problems[p].reason));
        json_array_append_new(problems, o);
    }
    json_t *hello = run->server_hello;
    json_t *overall_json = metrics_json(a, overall);
    json_object_set_new(overall_json, "problems_run", json_integer(ran));
    json_object_set_new(overall_json, "problems_left_out", json_integer(run->n_problems - ran));
    json_t *settings = json_pack(
        "{s:s, s:s, s:s, s:i, s:i, s:s, s:o, s:s?, s:f, s:o, s:o}", "run_id", a->run_id, "group",
        a->group ? a->group : a->run_id, "problems", a->problems, "trajectories", a->trajectories,
        "turns", a->turns, "policy", a->policy, "k", ks, "options", a->options, "noisy_cv",
        a->noisy_cv, "seed", a->seed >= 0 ? json_integer(a->seed) : json_null(), "store",
        run->store[0] ? json_string(run->store) : json_null());
    json_t *report = json_pack(
        "{s:i, s:s, s:O?, s:O?, s:o, s:f, s:i, s:f, s:o, s:o, s:o, s:O?}", "pkgym_eval", 1, "date",
        date, "server", json_object_get(hello, "server"), "gpus", json_object_get(hello, "gpus"),
        "settings", settings, "wall_s", run->wall_s, "steps", run->steps, "steps_per_s",
        run->wall_s > 0 ? run->steps / run->wall_s : 0.0, "overall", overall_json, "problems",
        problems, "trajectories", trajectories_json(run), "server_stats", run->server_stats);
    if (report)
        json_object_set_new(report, "gpu_models", pk_eval_gpu_models_json(run));
    json_t *examples = report ? pk_eval_examples_json(&run->examples) : NULL;
    if (examples) /* episodes asked for archive examples: how many reached the prompts */
        json_object_set_new(report, "examples", examples);
    if (report && a->examples)
        json_object_set_new(json_object_get(report, "settings"), "examples",
                            json_loads(a->examples, 0, NULL));
    return report;
}

static int write_all(const pk_eval_run *run, const problem_metrics *pm,
                     const problem_metrics *overall, pk_error *err) {
    const pk_eval_args *a = run->args;
    int rc = pk_mkdir_p(a->out_dir, err);
    json_t *j = rc ? NULL : report_json(run, pm, overall);
    char *json = j ? json_dumps(j, JSON_INDENT(2)) : NULL;
    char *md = markdown(run, pm, overall);
    const char **names = calloc((size_t)run->n_problems + 1, sizeof *names);
    double *series = calloc(((size_t)run->n_problems + 1) * (size_t)a->turns, sizeof *series);
    int ns = 0;
    for (int p = 0; names && series && p < run->n_problems; p++) {
        if (run->problems[p].skipped || pm[p].n == 0)
            continue;
        names[ns] = run->problems[p].id;
        memcpy(series + (size_t)ns++ * (size_t)a->turns, pm[p].best_so_far,
               (size_t)a->turns * sizeof *series);
    }
    if (names && series) {
        names[ns] = "mean over problems";
        memcpy(series + (size_t)ns++ * (size_t)a->turns, overall->best_so_far,
               (size_t)a->turns * sizeof *series);
    }
    char *svg = names && series ? pk_eval_svg_turn_scaling("Best speedup so far by turn", names,
                                                           series, ns, a->turns)
                                : NULL;
    if (!rc && (!json || !md || !svg))
        rc = pk_error_set(err, PK_ERR_NOMEM, "out of memory writing the report");
    if (!rc) { /* the timelines, and their list at the end of report.md */
        pk_strbuf sb = {0};
        pk_strbuf_puts(&sb, md);
        rc = pk_eval_profiles_write(run, &sb, err);
        free(md);
        md = pk_strbuf_take(&sb);
        if (!rc && !md)
            rc = pk_error_set(err, PK_ERR_NOMEM, "out of memory writing the report");
    }
    if (!rc)
        rc = write_text(a->out_dir, "report.json", json, err);
    if (!rc)
        rc = write_text(a->out_dir, "report.md", md, err);
    if (!rc)
        rc = write_text(a->out_dir, "turn_scaling.svg", svg, err);
    if (!rc && !a->quiet)
        printf("\n%s\nReport: %s/report.md, report.json, turn_scaling.svg\n", md, a->out_dir);
    if (!rc && !a->quiet && run->store[0])
        printf("Trajectory store (kept): %s\n", run->store);
    json_decref(j);
    free(json);
    free(md);
    free(svg);
    free(names);
    free(series);
    return rc;
}

int pk_eval_report_write(const pk_eval_run *run, pk_error *err) {
    const pk_eval_args *a = run->args;
    problem_metrics *pm = calloc((size_t)run->n_problems + 1, sizeof *pm);
    problem_metrics overall;
    memset(&overall, 0, sizeof overall);
    overall.best_so_far = calloc((size_t)a->turns, sizeof *overall.best_so_far);
    int rc = pm && overall.best_so_far ? PK_OK : pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    for (int p = 0; !rc && p < run->n_problems; p++)
        if (!run->problems[p].skipped)
            rc = problem_metrics_compute(run, p, &pm[p], err);
    if (!rc) {
        overall_compute(a, pm, run->n_problems, &overall);
        rc = write_all(run, pm, &overall, err);
    }
    for (int p = 0; pm && p < run->n_problems; p++)
        free(pm[p].best_so_far);
    free(pm);
    free(overall.best_so_far);
    return rc;
}
