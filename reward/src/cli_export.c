/* `pkgym export`: stored trajectories, or only the verified kernels, as JSONL. Each verified
 * line is one (task prompt, plan/summary, code) triple with its measurements: the fine-tuning
 * data DSL-Monkeys builds. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli_filter.h"
#include "export_verified.h"
#include "pk_reward.h"
#include "pk_store.h"
#include "store_reader.h"

typedef struct export_ctx {
    FILE *out;
    int verified, all_turns;
    long lines;
    pk_verified_set kept; /* --verified: written once all are read, best first */
} export_ctx;

static json_t *text_or_null(const char *s) {
    return s ? json_string(s) : json_null();
}

/* Stored JSON is embedded as JSON; text that does not parse is kept as a string. */
static json_t *embedded_json(const char *s) {
    if (!s)
        return json_null();
    json_t *j = json_loads(s, 0, NULL);
    return j ? j : json_string(s);
}

static json_t *trajectory_json(const pk_store_episode *e) {
    json_t *turns = json_array();
    for (int i = 0; i < e->n_turns; i++) {
        const pk_turn *t = &e->turns[i];
        json_array_append_new(
            turns,
            json_pack("{s:i, s:o, s:o, s:o, s:o, s:s, s:f, s:o, s:o, s:f, s:f}", "turn", t->turn,
                      "prompt", text_or_null(t->prompt), "action", text_or_null(t->action),
                      "summary", text_or_null(t->summary), "code", text_or_null(t->code), "status",
                      pk_status_name(t->status), "score", t->score, "feedback",
                      text_or_null(t->feedback), "result", embedded_json(t->result_json),
                      "started_at", t->started_at, "finished_at", t->finished_at));
    }
    json_t *returns = json_null();
    if (e->finished) {
        returns = json_array();
        for (int i = 0; i < e->n_turns; i++)
            json_array_append_new(returns, json_real(e->returns[i]));
    }
    const pk_episode_row *r = &e->row;
    return json_pack("{s:s, s:s, s:o, s:I, s:i, s:o, s:o, s:f, s:o, s:o, s:o}", "episode_id",
                     r->episode_id, "problem_id", r->problem_id, "group", text_or_null(r->group),
                     "seed", (json_int_t)r->seed, "max_turns", r->max_turns, "task_prompt",
                     text_or_null(r->task_prompt), "config", embedded_json(r->config_json),
                     "created_at", r->created_at, "finished_at",
                     e->finished_at > 0 ? json_real(e->finished_at) : json_null(), "online_returns",
                     returns, "turns", turns);
}

static json_t *verified_json(const pk_episode_row *e, const pk_turn *t) {
    pk_turn_facts f = {0};
    if (t->result_json)
        pk_turn_facts_from_result_json(t->result_json, &f, NULL);
    json_t *line = json_pack(
        "{s:s, s:s, s:o, s:i, s:o, s:o, s:o, s:o, s:f, s:f, s:f, s:o}", "problem_id", e->problem_id,
        "episode_id", e->episode_id, "group", text_or_null(e->group), "turn", t->turn,
        "task_prompt", text_or_null(e->task_prompt), "prompt", text_or_null(t->prompt), "summary",
        text_or_null(t->summary), "code", text_or_null(t->code), "speedup", f.speedup, "time_us",
        f.time_us, "baseline_us", f.baseline_us, "result", embedded_json(t->result_json));
    /* How far to trust the speedup: both CVs, and whether the baseline was timed this step. */
    if (line) {
        json_object_set_new(line, "time_cv", json_real(f.time_cv));
        json_object_set_new(line, "baseline_cv", json_real(f.baseline_cv));
        json_object_set_new(line, "baseline_source",
                            json_string(f.baseline_us <= 0  ? "none"
                                        : f.baseline_cached ? "cached"
                                                            : "measured"));
    }
    return line;
}

static int write_line(export_ctx *ctx, json_t *j, pk_error *err) {
    int rc = PK_OK;
    if (!j)
        return pk_error_set(err, PK_ERR_NOMEM, "export: could not build a JSON record");
    if (json_dumpf(j, ctx->out, JSON_COMPACT) != 0 || fputc('\n', ctx->out) == EOF)
        rc = pk_error_errno(err, PK_ERR_IO, "export: write failed");
    json_decref(j);
    ctx->lines += rc == PK_OK;
    return rc;
}

static int export_episode(const pk_store_episode *e, void *vctx, pk_error *err) {
    export_ctx *ctx = vctx;
    if (!ctx->verified)
        return write_line(ctx, trajectory_json(e), err);
    for (int i = 0; i < e->n_turns; i++) {
        if (e->turns[i].status != PK_STATUS_CORRECT)
            continue;
        int rc = pk_verified_set_add(&ctx->kept, verified_json(&e->row, &e->turns[i]), err);
        if (rc)
            return rc;
    }
    return PK_OK;
}

enum { N_OWN = 4, N_OPTS = N_OWN + PK_CLI_FILTER_ROWS };

static void options_table(pk_opt *t, const char **db, const char **out, export_ctx *ctx,
                          pk_store_filter *filter) {
    const pk_opt rows[N_OWN] = {
        {.type = PK_OPT_STR,
         .name = "--db",
         .metavar = "FILE",
         .help = "trajectory store (opened read-only); required",
         .dest = db},
        {.type = PK_OPT_FLAG,
         .name = "--verified",
         .help = "only correct turns, as (task, plan, code, speedup) records",
         .dest = &ctx->verified},
        {.type = PK_OPT_FLAG,
         .name = "--all-turns",
         .help = "with --verified: every correct turn, duplicates kept",
         .dest = &ctx->all_turns},
        {.type = PK_OPT_STR,
         .name = "--out",
         .metavar = "FILE.jsonl",
         .help = "write there instead of stdout",
         .dest = out},
    };
    memcpy(t, rows, sizeof rows);
    pk_cli_filter_rows(t + N_OWN, filter);
}

static void usage(FILE *f, const pk_opt *t) {
    pk_opts_synopsis(f, "usage: pkgym export", t, N_OPTS, "");
    fprintf(f, "\nWrites one JSON object per line: a whole trajectory (episode, config, online\n"
               "returns, every turn's prompt, action, summary, code, status, score, feedback and\n"
               "evaluation result), or with --verified one line per verified kernel: task\n"
               "(prompt), plan (summary), code, speedup and the turn's prompt and measurements,\n"
               "one line per kernel hash and problem, best first per problem (--all-turns: one\n"
               "per correct turn). Turns are numbered from 1.\n\n");
    pk_opts_help(f, t, N_OPTS);
    fprintf(f, "\nSchema of both line kinds: docs/rewards.md.\n");
}

int pk_cmd_export(int argc, char **argv) {
    const char *db = NULL, *out_path = NULL;
    export_ctx ctx = {.out = stdout};
    pk_store_filter filter;
    memset(&filter, 0, sizeof filter);
    pk_opt t[N_OPTS];
    options_table(t, &db, &out_path, &ctx, &filter);
    int prc = pk_opts_parse("export", t, N_OPTS, argc, argv, 1, 0, NULL);
    if (prc == PK_OPTS_HELP) {
        usage(stdout, t);
        return 0;
    }
    if (prc != PK_OPTS_OK)
        return 2;
    if (ctx.all_turns && !ctx.verified) {
        fprintf(stderr, "pkgym export: --all-turns goes with --verified\n");
        return 2;
    }
    if (!db) {
        fprintf(stderr, "pkgym export: --db FILE is required (see --help)\n");
        return 2;
    }
    pk_error err = {0};
    pk_store *store = NULL;
    if (pk_store_open_readonly(db, &store, &err)) {
        fprintf(stderr, "pkgym export: %s\n", err.message);
        return 2;
    }
    if (out_path && !(ctx.out = fopen(out_path, "w"))) {
        perror("pkgym export: cannot open --out file");
        pk_store_close(store);
        return 2;
    }
    int rc = pk_store_each_episode(store, 1, &filter, export_episode, &ctx, &err);
    pk_store_close(store);
    long duplicates = 0;
    if (rc == PK_OK && ctx.verified)
        rc =
            pk_verified_set_write(&ctx.kept, ctx.out, ctx.all_turns, &ctx.lines, &duplicates, &err);
    pk_verified_set_free(&ctx.kept);
    if (fflush(ctx.out) != 0 && rc == PK_OK)
        rc = pk_error_errno(&err, PK_ERR_IO, "export: write failed");
    if (out_path && fclose(ctx.out) != 0 && rc == PK_OK)
        rc = pk_error_errno(&err, PK_ERR_IO, "export: write failed");
    if (rc) {
        fprintf(stderr, "pkgym export: %s\n", err.message);
        return 2;
    }
    fprintf(stderr, "pkgym export: %ld line(s)%s%s", ctx.lines, ctx.verified ? " (verified)" : "",
            pk_cli_filter_active(&filter) ? " matching the filters" : "");
    if (duplicates)
        fprintf(stderr, "; %ld duplicate kernel(s) left out", duplicates);
    fputc('\n', stderr);
    return 0;
}
