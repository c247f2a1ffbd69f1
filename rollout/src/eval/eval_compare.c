/* `pkgym eval --examples SPEC --compare-examples`: the same evaluation without, then with, the
 * archive's in-context examples (docs/archive.md), and the two reports side by side: pass@k,
 * fast_p and the best speedup by turn, overall and per problem, and how many prompts carried
 * examples within their budget. */
#include <stdlib.h>
#include <string.h>

#include "pk_eval_internal.h"

char *pk_eval_reset_options(const pk_eval_args *a, int with_examples, pk_error *err) {
    json_error_t je;
    json_t *o = a->options ? json_loads(a->options, 0, &je) : json_object();
    if (!json_is_object(o)) {
        json_decref(o);
        pk_error_set(err, PK_ERR_INVALID, "--options must be a JSON object: %s",
                     a->options ? je.text : "out of memory");
        return NULL;
    }
    json_t *x = with_examples && a->examples ? json_loads(a->examples, 0, &je) : NULL;
    if (with_examples && a->examples && !json_is_object(x)) {
        json_decref(o);
        json_decref(x);
        pk_error_set(err, PK_ERR_INVALID,
                     "--examples must be a JSON object, e.g. "
                     "'{\"k\":3,\"mode\":\"alternate\"}'");
        return NULL;
    }
    if (x)
        json_object_set_new(o, "examples", x);
    else
        json_object_del(o, "examples"); /* the arm without examples has none */
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    if (!text)
        pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    return text;
}

json_t *pk_eval_examples_json(const pk_eval_examples_seen *x) {
    if (x->prompts == 0)
        return NULL;
    return json_pack("{s:i, s:i, s:I, s:I, s:i}", "prompts", x->prompts, "prompts_with_examples",
                     x->prompts_with_examples, "shown", (json_int_t)x->shown, "dropped_for_budget",
                     (json_int_t)x->dropped_for_budget, "errors", x->errors);
}

static json_t *load_report(const char *out_dir, const char *arm, pk_error *err) {
    char *dir = pk_path_join(out_dir, arm);
    char *path = dir ? pk_path_join(dir, "report.json") : NULL;
    json_error_t je;
    json_t *r = path ? json_load_file(path, 0, &je) : NULL;
    if (!r)
        pk_error_set(err, PK_ERR_IO, "eval: cannot read %s: %s", path ? path : arm,
                     path ? je.text : "out of memory");
    free(dir);
    free(path);
    return r;
}

/* "a → b" of one number of both reports, as a Markdown cell. */
static void cell(pk_strbuf *md, json_t *a, json_t *b, int percent) {
    double x = json_number_value(a), y = json_number_value(b), m = percent ? 100 : 1;
    pk_strbuf_printf(md, percent ? " %.0f%% | %.0f%% |" : " %.3f | %.3f |", m * x, m * y);
}

static void table(pk_strbuf *md, const char *name, json_t *w, json_t *x, json_t *ks) {
    pk_strbuf_printf(md, "| %s |", name);
    size_t i;
    json_t *k;
    json_array_foreach(ks, i, k) {
        char key[16];
        snprintf(key, sizeof key, "%lld", (long long)json_integer_value(k));
        cell(md, json_object_get(json_object_get(w, "pass@k"), key),
             json_object_get(json_object_get(x, "pass@k"), key), 1);
    }
    cell(md, json_object_get(w, "fast_1"), json_object_get(x, "fast_1"), 1);
    cell(md, json_object_get(w, "fast_1.5"), json_object_get(x, "fast_1.5"), 1);
    cell(md, json_object_get(w, "best_speedup"), json_object_get(x, "best_speedup"), 0);
    pk_strbuf_puts(md, "\n");
}

static json_t *problem_of(json_t *report, const char *id) {
    size_t i;
    json_t *p;
    json_array_foreach(json_object_get(report, "problems"), i, p) {
        const char *pid = json_string_value(json_object_get(p, "id"));
        if (pid && strcmp(pid, id) == 0)
            return p;
    }
    return NULL;
}

static char *markdown(const pk_eval_args *a, json_t *w, json_t *x) {
    pk_strbuf md = {0};
    json_t *ks = json_object_get(json_object_get(w, "settings"), "k");
    pk_strbuf_printf(&md,
                     "# pkgym eval: without and with archive examples\n\n"
                     "Run %s, problems %s, %d trajectories x %d turns, policy %s; examples %s.\n"
                     "Each pair of columns is without | with.\n\n| problem |",
                     a->run_id, a->problems, a->trajectories, a->turns, a->policy, a->examples);
    size_t i;
    json_t *k;
    json_array_foreach(ks, i, k)
        pk_strbuf_printf(&md, " pass@%lld | |", (long long)json_integer_value(k));
    pk_strbuf_puts(&md, " fast_1 | | fast_1.5 | | best speedup | |\n|---|");
    for (size_t c = 0; c < 2 * json_array_size(ks) + 6; c++)
        pk_strbuf_puts(&md, "---|");
    pk_strbuf_puts(&md, "\n");
    table(&md, "overall", json_object_get(w, "overall"), json_object_get(x, "overall"), ks);
    json_t *p;
    json_array_foreach(json_object_get(w, "problems"), i, p) {
        const char *id = json_string_value(json_object_get(p, "id"));
        json_t *q = id ? problem_of(x, id) : NULL;
        if (q && !json_is_true(json_object_get(p, "skipped")))
            table(&md, id, p, q, ks);
    }
    pk_strbuf_puts(&md, "\nBest speedup so far by turn (mean over trajectories):\n\n"
                        "| turn | without | with |\n|---|---|---|\n");
    json_t *bw = json_object_get(json_object_get(w, "overall"), "best_so_far_by_turn");
    json_t *bx = json_object_get(json_object_get(x, "overall"), "best_so_far_by_turn");
    for (i = 0; i < json_array_size(bw); i++)
        pk_strbuf_printf(&md, "| %zu | %.3f | %.3f |\n", i + 1,
                         json_number_value(json_array_get(bw, i)),
                         json_number_value(json_array_get(bx, i)));
    json_t *seen = json_object_get(x, "examples");
    pk_strbuf_printf(
        &md,
        "\nExamples in prompts (with): %lld of %lld prompts carried examples, %lld examples "
        "shown, %lld left out to stay within the budget, %lld retrieval errors.\n",
        (long long)json_integer_value(json_object_get(seen, "prompts_with_examples")),
        (long long)json_integer_value(json_object_get(seen, "prompts")),
        (long long)json_integer_value(json_object_get(seen, "shown")),
        (long long)json_integer_value(json_object_get(seen, "dropped_for_budget")),
        (long long)json_integer_value(json_object_get(seen, "errors")));
    return pk_strbuf_take(&md);
}

int pk_eval_compare_write(const pk_eval_args *a, pk_error *err) {
    json_t *w = load_report(a->out_dir, "without", err);
    json_t *x = w ? load_report(a->out_dir, "with", err) : NULL;
    if (!x) {
        json_decref(w);
        return err->code;
    }
    json_t *both =
        json_pack("{s:i, s:s, s:s, s:{s:O, s:O}, s:{s:O, s:O}, s:O?}", "pkgym_eval_compare", 1,
                  "run_id", a->run_id, "examples", a->examples, "overall", "without",
                  json_object_get(w, "overall"), "with", json_object_get(x, "overall"), "problems",
                  "without", json_object_get(w, "problems"), "with", json_object_get(x, "problems"),
                  "examples_seen", json_object_get(x, "examples"));
    char *md = markdown(a, w, x);
    char *jpath = pk_path_join(a->out_dir, "examples_compare.json");
    char *mpath = pk_path_join(a->out_dir, "examples_compare.md");
    int rc = !both || !md || !jpath || !mpath ? pk_error_set(err, PK_ERR_NOMEM, "out of memory")
             : json_dump_file(both, jpath, JSON_INDENT(2)) != 0
                 ? pk_error_set(err, PK_ERR_IO, "eval: cannot write %s", jpath)
                 : PK_OK;
    FILE *f = rc ? NULL : fopen(mpath, "w");
    if (!rc && (!f || fputs(md, f) < 0))
        rc = pk_error_errno(err, PK_ERR_IO, "eval: cannot write %s", mpath);
    if (f && fclose(f) != 0 && !rc)
        rc = pk_error_errno(err, PK_ERR_IO, "eval: cannot write %s", mpath);
    if (!rc && !a->quiet)
        fputs(md, stdout);
    free(md);
    free(jpath);
    free(mpath);
    json_decref(both);
    json_decref(w);
    json_decref(x);
    return rc;
}
