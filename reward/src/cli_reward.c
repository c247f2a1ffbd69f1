/* `pkgym reward`: the reward-ablation tool. Rescores every stored trajectory under a reward
 * config (or its own stored one, verifying the online scores and returns), and prints the
 * returns and GRPO advantages as a table or as JSON. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ablation.h"
#include "cli_filter.h"
#include "pk_metrics.h"
#include "pk_reward.h"
#include "pk_store.h"

typedef struct reward_args {
    const char *db, *config;
    pk_ablation_opts opts;
    pk_store_filter filter;
    int json, verify;
    int k;
    double p;
} reward_args;

/* --eps, --tolerance, --p: a number >= 0. */
static int parse_nonneg(const char *cmd, const char *name, const char *value, void *dest) {
    char *end;
    double v = strtod(value, &end);
    if (!*value || *end || !(v >= 0) || v > 1e12) {
        fprintf(stderr, "pkgym %s: %s takes a number >= 0, got '%s'\n", cmd, name, value);
        return -1;
    }
    *(double *)dest = v;
    return 0;
}

static int parse_normalize(const char *cmd, const char *name, const char *value, void *dest) {
    if (strcmp(value, "problem") != 0 && strcmp(value, "group") != 0) {
        fprintf(stderr, "pkgym %s: %s takes problem or group, got '%s'\n", cmd, name, value);
        return -1;
    }
    *(pk_normalize *)dest = value[0] == 'g' ? PK_NORMALIZE_GROUP : PK_NORMALIZE_PROBLEM;
    return 0;
}

enum { N_OWN = 10, N_OPTS = N_OWN + PK_CLI_FILTER_ROWS };

static void options_table(pk_opt *t, reward_args *a) {
    const pk_opt rows[N_OWN] = {
        {.type = PK_OPT_STR,
         .name = "--db",
         .metavar = "FILE",
         .help = "trajectory store written by `pkgym serve` (opened read-only); required",
         .dest = &a->db},
        {.type = PK_OPT_STR,
         .name = "--config",
         .metavar = "FILE.json",
         .help = "reward config (JSON, merged over the defaults): the reward keys,\n"
                 "or {\"reward\": {...}} as in reset's options and info.settings;\n"
                 "without it each trajectory's stored config is used and the\n"
                 "results must match the online scores and returns (exit 1\n"
                 "otherwise)",
         .dest = &a->config},
        {.type = PK_OPT_CUSTOM,
         .name = "--normalize",
         .metavar = "problem|group",
         .help = "advantage normalization set: problem (default) or group; with\n"
                 "group, an episode without a group is a set of its own (never\n"
                 "merged with other ungrouped episodes), and a note says how many",
         .dest = &a->opts.normalize,
         .parse = parse_normalize},
        {.type = PK_OPT_FLAG,
         .name = "--json",
         .help = "print JSON instead of a table",
         .dest = &a->json},
        {.type = PK_OPT_FLAG,
         .name = "--verify",
         .help = "with --config too: exit 1 unless scores and returns match",
         .dest = &a->verify},
        {.type = PK_OPT_CUSTOM,
         .name = "--eps",
         .metavar = "E",
         .help = "advantage denominator epsilon (default 1e-4)",
         .dest = &a->opts.eps,
         .parse = parse_nonneg},
        {.type = PK_OPT_CUSTOM,
         .name = "--tolerance",
         .metavar = "T",
         .help = "relative tolerance of the comparison (default 1e-9)",
         .dest = &a->opts.tolerance,
         .parse = parse_nonneg},
        {.type = PK_OPT_SECTION, .help = "Metrics per problem:"},
        {.type = PK_OPT_INT,
         .name = "--k",
         .metavar = "K",
         .help = "pass@K, best@K, avg@K (default 1)",
         .dest = &a->k,
         .lo = 1,
         .hi = 1000000},
        {.type = PK_OPT_CUSTOM,
         .name = "--p",
         .metavar = "P",
         .help = "fast_P: correct and at least P times the baseline (default 1.0)",
         .dest = &a->p,
         .parse = parse_nonneg},
    };
    memcpy(t, rows, sizeof rows);
    pk_cli_filter_rows(t + N_OWN, &a->filter);
}

static void usage(FILE *f, const pk_opt *t) {
    pk_opts_synopsis(f, "usage: pkgym reward", t, N_OPTS, "");
    fprintf(f,
            "\nRecomputes every stored trajectory's scores and returns, and its GRPO advantages\n"
            "(R - mean) / (std + eps) over all turns of all trajectories of a problem or group.\n"
            "Turns are numbered from 1, as in step replies, eval and export.\n\n");
    pk_opts_help(f, t, N_OPTS);
    fprintf(f, "\nExit status: 0 ok, 1 mismatch with the online values, 2 usage or store error.\n"
               "Configuration keys and the store schema: docs/rewards.md.\n");
}

/* Returns -1 to continue, else the exit status. */
static int parse_args(int argc, char **argv, reward_args *a) {
    memset(a, 0, sizeof *a);
    a->opts.eps = 1e-4;
    a->opts.tolerance = 1e-9;
    a->k = 1;
    a->p = 1.0;
    a->opts.filter = &a->filter;
    pk_opt t[N_OPTS];
    options_table(t, a);
    int rc = pk_opts_parse("reward", t, N_OPTS, argc, argv, 1, 0, NULL);
    if (rc == PK_OPTS_HELP) {
        usage(stdout, t);
        return 0;
    }
    if (rc != PK_OPTS_OK)
        return 2;
    if (!a->db) {
        fprintf(stderr, "pkgym reward: --db FILE is required (see --help)\n");
        return 2;
    }
    if (!a->config)
        a->verify = 1; /* the stored config must reproduce the online values */
    return -1;
}

static int load_config(const char *path, pk_reward_config *c, pk_error *err) {
    char *text = NULL;
    int rc = pk_read_file(path, &text, NULL, err);
    if (rc)
        return rc;
    pk_reward_config_default(c);
    rc = pk_reward_config_merge_user_json(c, text, err);
    free(text);
    return rc;
}

static const char *normalize_name(pk_normalize n) {
    return n == PK_NORMALIZE_GROUP ? "group" : "problem";
}

/* Index of the first episode of each distinct problem, in store order. */
static int first_of_problem(const pk_ablation *a, int i) {
    for (int j = 0; j < i; j++)
        if (strcmp(a->episodes[j].problem_id, a->episodes[i].problem_id) == 0)
            return 0;
    return 1;
}

/* Calls fn once per problem, in store order, with its metrics, or NULL and why they could not
 * be computed. */
typedef void (*problem_metrics_fn)(const char *problem, const pk_metrics_summary *m,
                                   const char *error, void *ctx);
static void each_problem_metrics(const pk_ablation *a, const reward_args *args,
                                 problem_metrics_fn fn, void *ctx) {
    for (int i = 0; i < a->n_episodes; i++) {
        if (!first_of_problem(a, i))
            continue;
        pk_metrics_summary m;
        pk_error err = {0};
        const char *problem = a->episodes[i].problem_id;
        int rc = pk_ablation_problem_metrics(a, problem, args->k, args->p, &m, &err);
        fn(problem, rc ? NULL : &m, err.message, ctx);
    }
}

static void print_problem_metrics(const char *problem, const pk_metrics_summary *m,
                                  const char *error, void *ctx) {
    (void)ctx;
    if (!m)
        printf("%-24s %s\n", problem, error);
    else
        printf("%-24s %12d %7d %11.4f %9.4f %9.4f %9.4f %9.4f\n", problem, m->n, m->n_correct,
               m->mean_best_speedup, m->fast_p, m->pass_at_k, m->best_at_k, m->avg_at_k);
}

static void print_metrics(const pk_ablation *a, const reward_args *args) {
    printf("\n%-24s %12s %7s %11s %9s %9s %9s %9s\n", "problem", "trajectories", "correct",
           "mean_best", "fast_p", "pass@k", "best@k", "avg@k");
    each_problem_metrics(a, args, print_problem_metrics, NULL);
    printf("(k = %d, p = %g; speedups against the config's baseline)\n", args->k, args->p);
}

static void append_problem_metrics(const char *problem, const pk_metrics_summary *m,
                                   const char *error, void *problems) {
    if (!m)
        json_array_append_new(problems,
                              json_pack("{s:s, s:s}", "problem_id", problem, "error", error));
    else
        json_array_append_new(
            problems, json_pack("{s:s, s:i, s:i, s:f, s:f, s:f, s:f, s:f, s:f}", "problem_id",
                                problem, "trajectories", m->n, "correct", m->n_correct,
                                "correct_rate", m->correct_rate, "mean_best_speedup",
                                m->mean_best_speedup, "fast_p", m->fast_p, "pass_at_k",
                                m->pass_at_k, "best_at_k", m->best_at_k, "avg_at_k", m->avg_at_k));
}

static json_t *metrics_json(const pk_ablation *a, const reward_args *args) {
    json_t *problems = json_array();
    each_problem_metrics(a, args, append_problem_metrics, problems);
    return json_pack("{s:i, s:f, s:o}", "k", args->k, "p", args->p, "problems", problems);
}

static void print_table(const pk_ablation *a, const reward_args *args) {
    int turns = 0;
    for (int i = 0; i < a->n_episodes; i++)
        turns += a->episodes[i].n_turns;
    printf("pkgym reward: %d trajectories, %d turns; config: %s; normalize: %s; eps %g\n",
           a->n_episodes, turns, args->config ? args->config : "stored per trajectory",
           normalize_name(args->opts.normalize), args->opts.eps);
    printf("%-32s %-24s %-12s %4s %-13s %8s %9s %9s %9s %9s %9s\n", "episode", "problem", "group",
           "turn", "status", "speedup", "score", "return", "advantage", "online_s", "online_R");
    for (int i = 0; i < a->n_episodes; i++) {
        const pk_ablation_episode *e = &a->episodes[i];
        for (int t = 0; t < e->n_turns; t++) {
            const pk_ablation_turn *u = &e->turns[t];
            char online_r[32] = "-";
            if (e->finished)
                snprintf(online_r, sizeof online_r, "%9.4f", u->online_return);
            printf("%-32s %-24s %-12s %4d %-13s %8.4f %9.4f %9.4f %9.4f %9.4f %9s%s\n", e->id,
                   e->problem_id, e->group ? e->group : "-", u->turn, pk_status_name(u->status),
                   u->speedup, u->score, u->ret, u->advantage, u->online_score, online_r,
                   args->verify && u->mismatch ? "  MISMATCH" : "");
        }
    }
    printf("\n%-24s %12s %6s %12s %12s\n", normalize_name(args->opts.normalize), "trajectories",
           "turns", "mean_return", "std_return");
    for (int k = 0; k < a->n_sets; k++)
        printf("%-24s %12d %6d %12.6f %12.6f\n", a->sets[k].key, a->sets[k].n_trajectories,
               a->sets[k].n_turns, a->sets[k].mean, a->sets[k].std);
    if (a->n_ungrouped)
        printf("(%d episode(s) without a group: each is normalized on its own, over its own "
               "turns)\n",
               a->n_ungrouped);
    print_metrics(a, args);
    printf("\nonline comparison: %d turn(s) differ; %d trajectory(ies) without online returns\n",
           a->n_mismatches, a->n_unfinished);
}

static json_t *config_json(const pk_reward_config *c) {
    char *text = pk_reward_config_to_json(c);
    json_t *j = text ? json_loads(text, 0, NULL) : NULL;
    free(text);
    return j ? j : json_null();
}

static json_t *episode_json(const pk_ablation_episode *e) {
    json_t *turns = json_array();
    for (int t = 0; t < e->n_turns; t++) {
        const pk_ablation_turn *u = &e->turns[t];
        json_array_append_new(
            turns,
            json_pack("{s:i, s:s, s:f, s:f, s:f, s:f, s:f, s:o, s:b}", "turn", u->turn, "status",
                      pk_status_name(u->status), "speedup", u->speedup, "score", u->score, "return",
                      u->ret, "advantage", u->advantage, "online_score", u->online_score,
                      "online_return", e->finished ? json_real(u->online_return) : json_null(),
                      "mismatch", u->mismatch));
    }
    return json_pack("{s:s, s:s, s:o, s:I, s:b, s:o, s:o}", "episode_id", e->id, "problem_id",
                     e->problem_id, "group", e->group ? json_string(e->group) : json_null(), "seed",
                     (json_int_t)e->seed, "finished", e->finished, "config",
                     config_json(&e->config), "turns", turns);
}

static int print_json(const pk_ablation *a, const reward_args *args,
                      const pk_reward_config *config) {
    json_t *episodes = json_array(), *sets = json_array();
    for (int i = 0; i < a->n_episodes; i++)
        json_array_append_new(episodes, episode_json(&a->episodes[i]));
    for (int k = 0; k < a->n_sets; k++)
        json_array_append_new(sets, json_pack("{s:s, s:b, s:i, s:i, s:f, s:f}", "key",
                                              a->sets[k].key, "ungrouped", a->sets[k].ungrouped,
                                              "trajectories", a->sets[k].n_trajectories, "turns",
                                              a->sets[k].n_turns, "mean_return", a->sets[k].mean,
                                              "std_return", a->sets[k].std));
    json_t *root =
        json_pack("{s:o, s:s, s:f, s:o, s:o, s:i, s:i, s:i, s:o}", "config",
                  config ? config_json(config) : json_null(), "normalize",
                  normalize_name(args->opts.normalize), "eps", args->opts.eps, "episodes", episodes,
                  "sets", sets, "mismatches", a->n_mismatches, "unfinished", a->n_unfinished,
                  "ungrouped", a->n_ungrouped, "metrics", metrics_json(a, args));
    if (!root || json_dumpf(root, stdout, JSON_INDENT(1)) != 0) {
        json_decref(root);
        fprintf(stderr, "pkgym reward: could not write JSON\n");
        return 2;
    }
    putchar('\n');
    json_decref(root);
    return 0;
}

int pk_cmd_reward(int argc, char **argv) {
    reward_args args;
    int status = parse_args(argc, argv, &args);
    if (status >= 0)
        return status;
    pk_error err = {0};
    pk_reward_config config;
    if (args.config && load_config(args.config, &config, &err)) {
        fprintf(stderr, "pkgym reward: %s: %s\n", args.config, err.message);
        return 2;
    }
    args.opts.config = args.config ? &config : NULL;
    pk_store *store = NULL;
    pk_ablation a;
    if (pk_store_open_readonly(args.db, &store, &err) ||
        pk_ablation_run(store, &args.opts, &a, &err)) {
        fprintf(stderr, "pkgym reward: %s\n", err.message);
        pk_store_close(store);
        return 2;
    }
    pk_store_close(store);
    if (a.n_ungrouped)
        fprintf(stderr,
                "pkgym reward: %d episode(s) have no group; with --normalize group each is its own "
                "normalization set\n",
                a.n_ungrouped);
    if (a.n_episodes == 0 && pk_cli_filter_active(&args.filter))
        fprintf(stderr, "pkgym reward: no stored episode matches the filters\n");
    status = 0;
    if (args.json)
        status = print_json(&a, &args, args.opts.config);
    else
        print_table(&a, &args);
    if (status == 0 && args.verify && a.n_mismatches > 0) {
        fprintf(stderr,
                "pkgym reward: %d turn(s) differ from the online scores or returns "
                "(tolerance %g)\n",
                a.n_mismatches, args.opts.tolerance);
        status = 1;
    }
    pk_ablation_free(&a);
    return status;
}
