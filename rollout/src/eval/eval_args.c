/* `pkgym eval` options. */
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "pk_eval_internal.h"
#include "pk_cli_args.h"
#include "pk_opts.h"

static int parse_k(const char *cmd, const char *name, const char *v, void *dest);
static int parse_run_id(const char *cmd, const char *name, const char *v, void *dest);
static int parse_group(const char *cmd, const char *name, const char *v, void *dest);
static int parse_seed(const char *cmd, const char *name, const char *v, void *dest) {
    long n;
    if (pk_arg_long(cmd, name, v, 0, 0x7fffffffL, &n))
        return -1;
    *(long long *)dest = n;
    return 0;
}

static int parse_seconds(const char *cmd, const char *name, const char *v, void *dest) {
    return pk_arg_positive(cmd, name, v, "number of seconds", dest);
}

#define N_OPTS 22

static void options(pk_eval_args *a, pk_opt t[N_OPTS]) {
    const pk_opt rows[N_OPTS] = {
        {PK_OPT_STR, "--server", "ENDPOINT", "a running server (default: start an embedded one)",
         &a->server, 0, 0, NULL, 0, NULL, NULL},
        {PK_OPT_STR_LIST, "--serve-arg", "ARG",
         "pass ARG to the embedded `pkgym serve`; repeatable", a->serve_args, 0, 0,
         &a->n_serve_args, PK_EVAL_MAX_SERVE_ARGS, NULL, NULL},
        {PK_OPT_STR, "--data-dir", "DIR",
         "the embedded server's trajectory store and caches, KEPT after\n"
         "the run (default OUT/data: OUT/data/trajectories.sqlite, for\n"
         "`pkgym reward` and `pkgym export`); with --server the store is\n"
         "that server's own --data-dir",
         &a->data_dir, 0, 0, NULL, 0, NULL, NULL},
        {PK_OPT_CUSTOM, "--run-id", "ID", "this run's id (default eval-<UTC time>-<random hex>)", a,
         0, 0, NULL, 0, parse_run_id, NULL},
        {PK_OPT_CUSTOM, "--group", "LABEL",
         "episodes are grouped as LABEL/<problem id> (default: the run\n"
         "id), so runs never share a normalization set by accident",
         a, 0, 0, NULL, 0, parse_group, NULL},
        {PK_OPT_STR, "--problems", "SEL", "all | tag:TAG | suite:SUITE | ID[,ID...] (default all)",
         &a->problems, 0, 0, NULL, 0, NULL, NULL},
        {PK_OPT_INT, "--trajectories", "N", "trajectories per problem (default 4)",
         &a->trajectories, 1, 100000, NULL, 0, NULL, "-G"},
        {PK_OPT_INT, "--turns", "N", "turns per trajectory (default 4)", &a->turns, 1, 1000, NULL,
         0, NULL, "-T"},
        {PK_OPT_STR, "--policy", "SPEC",
         "replay:DIR: DIR/<suite>/<name>/turn<k>.md, or per trajectory\n"
         "DIR/<suite>/<name>/traj<g>/turn<k>.md (1-based); a missing\n"
         "turn ends the trajectory. cmd:PROGRAM: run by /bin/sh once\n"
         "per turn, the observation as JSON on stdin {problem,\n"
         "trajectory, turn, prompt, feedback}; its stdout is the action",
         &a->policy, 0, 0, NULL, 0, NULL, NULL},
        {PK_OPT_STR, "--out", "DIR", "report directory (default ./pkgym-eval)", &a->out_dir, 0, 0,
         NULL, 0, NULL, NULL},
        {PK_OPT_STR, "--options", "JSON",
         "reset options for every episode (e.g. '{\"stop_on_correct\":true}')", &a->options, 0, 0,
         NULL, 0, NULL, NULL},
        {PK_OPT_STR, "--examples", "JSON",
         "reset's options.examples for every episode: archive kernels\n"
         "as in-context examples (docs/archive.md), e.g.\n"
         "'{\"k\":3,\"mode\":\"alternate\",\"scope\":\"other_problems\"}'",
         &a->examples, 0, 0, NULL, 0, NULL, NULL},
        {PK_OPT_FLAG, "--compare-examples", NULL,
         "run twice on one server, without then with --examples: reports\n"
         "in OUT/without and OUT/with, side by side in\n"
         "OUT/examples_compare.md and .json",
         &a->compare_examples, 0, 0, NULL, 0, NULL, NULL},
        {PK_OPT_CUSTOM, "--k", "LIST", "k values for pass@k, best@k, avg@k (default 1,G)", a, 0, 0,
         NULL, 0, parse_k, NULL},
        {PK_OPT_CUSTOM, "--seed", "N",
         "seed of every episode (default: each drawn by the server;\n"
         "report.json records every episode's seed)",
         &a->seed, 0, 0, NULL, 0, parse_seed, NULL},
        {PK_OPT_POSITIVE, "--noisy-cv", "X",
         "flag speedups whose candidate or baseline CV is above X\n"
         "(default 0.1); the report warns where they set a best speedup",
         &a->noisy_cv, 0, 0, NULL, 0, NULL, NULL},
        {PK_OPT_INT, "--concurrency", "N", "episodes open at once (default 64)", &a->concurrency, 1,
         100000, NULL, 0, NULL, NULL},
        {PK_OPT_INT, "--policy-jobs", "N", "cmd policy processes at once (default 4)",
         &a->policy_jobs, 1, 1024, NULL, 0, NULL, NULL},
        {PK_OPT_CUSTOM, "--step-timeout-s", "S",
         "wait for one step's reply at most S (default 900)", &a->step_timeout_s, 0, 0, NULL, 0,
         parse_seconds, NULL},
        {PK_OPT_CUSTOM, "--policy-timeout-s", "S", "one cmd policy call at most S (default 600)",
         &a->policy_timeout_s, 0, 0, NULL, 0, parse_seconds, NULL},
        {PK_OPT_FLAG, "--transcript", NULL, "print every step: status, reward, feedback, returns",
         &a->transcript, 0, 0, NULL, 0, NULL, NULL},
        {PK_OPT_FLAG, "--quiet", NULL, "no progress and no summary on stdout", &a->quiet, 0, 0,
         NULL, 0, NULL, NULL},
    };
    memcpy(t, rows, sizeof rows);
}
static int parse_k(const char *cmd, const char *name, const char *v, void *dest) {
    pk_eval_args *a = dest;
    char *copy = strdup(v);
    int rc = copy ? 0 : -1;
    a->n_k = 0;
    for (char *save = NULL, *tok = copy ? strtok_r(copy, ",", &save) : NULL; tok && !rc;
         tok = strtok_r(NULL, ",", &save)) {
        long k;
        if (a->n_k >= PK_EVAL_MAX_K || pk_arg_long(cmd, name, tok, 1, 1000000, &k))
            rc = -1;
        else
            a->k[a->n_k++] = (int)k;
    }
    free(copy);
    return rc;
}

/* Default k list {1, G}; drops k > G (the estimators need k <= n). */
static void settle_k(pk_eval_args *a) {
    if (a->n_k == 0) {
        a->k[a->n_k++] = 1;
        if (a->trajectories > 1)
            a->k[a->n_k++] = a->trajectories;
    }
    int n = 0;
    for (int i = 0; i < a->n_k; i++)
        if (a->k[i] <= a->trajectories)
            a->k[n++] = a->k[i];
        else
            fprintf(stderr, "pkgym eval: k=%d > G=%d dropped\n", a->k[i], a->trajectories);
    a->n_k = n;
}

/* eval-20261122T103005Z-3f9a1c: sorts by time, unique across runs started the same second. */
static void make_run_id(char *out, size_t cap) {
    char date[32];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y%m%dT%H%M%SZ", gmtime(&now));
    unsigned r = 0;
    if (getrandom(&r, sizeof r, 0) != sizeof r)
        r = (unsigned)pk_now_ns();
    snprintf(out, cap, "eval-%s-%06x", date, r & 0xffffffu);
}

/* Run ids and group labels become group names and file-system-safe labels. */
static int label_ok(const char *opt, const char *v, size_t max) {
    size_t n = strlen(v);
    if (n == 0 || n > max ||
        strspn(v, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                  "0123456789._-:/") != n) {
        fprintf(stderr, "pkgym eval: %s wants 1 to %zu characters of [A-Za-z0-9._:/-], got '%s'\n",
                opt, max, v);
        return -1;
    }
    return 0;
}

static int parse_run_id(const char *cmd, const char *name, const char *v, void *dest) {
    pk_eval_args *a = dest;
    (void)cmd;
    if (label_ok(name, v, sizeof a->run_id - 1))
        return -1;
    snprintf(a->run_id, sizeof a->run_id, "%s", v);
    return 0;
}

static int parse_group(const char *cmd, const char *name, const char *v, void *dest) {
    (void)cmd;
    if (label_ok(name, v, 128))
        return -1;
    ((pk_eval_args *)dest)->group = v;
    return 0;
}

void pk_eval_usage(FILE *f) {
    pk_eval_args a;
    pk_opt t[N_OPTS];
    options(&a, t);
    fprintf(f, "usage: pkgym eval --policy replay:DIR|cmd:PROGRAM [options]\n\n"
               "Scripted multi-turn evaluation: G trajectories x T turns per problem, against a\n"
               "running server (--server) or an embedded `pkgym serve` child on an ipc:// "
               "endpoint.\n\n");
    pk_opts_help(f, t, N_OPTS);
    fprintf(f,
            "\nWrites OUT/report.json (settings with the run id and the store, every trajectory's\n"
            "episode id, group, seed and turns), OUT/report.md, OUT/turn_scaling.svg and, with an\n"
            "embedded server, OUT/serve.log. Problems the server cannot run (a GPU problem on a\n"
            "server with too few GPUs) or the policy has no responses for are left out, and the\n"
            "report says why; the summary counts only the problems that ran. Exit status: 0 when\n"
            "every trajectory ran, 3 when some stopped on an error, 2 on bad usage, no server, or\n"
            "no problem that can run. A trajectory stopped by infra_error (the server's failure,\n"
            "after one more try) is left out of every figure and counted as infra_dropped.\n");
}

int pk_eval_args_parse(int argc, char **argv, pk_eval_args *a) {
    memset(a, 0, sizeof *a);
    a->problems = "all";
    a->trajectories = 4;
    a->turns = 4;
    a->out_dir = "pkgym-eval";
    a->concurrency = 64;
    a->policy_jobs = 4;
    a->step_timeout_s = 900;
    a->policy_timeout_s = 600;
    a->seed = -1;
    a->noisy_cv = 0.1;
    pk_opt t[N_OPTS];
    options(a, t);
    int pa = pk_opts_parse("eval", t, N_OPTS, argc, argv, 1, 0, NULL);
    if (pa == PK_OPTS_HELP)
        pk_eval_usage(stdout);
    if (pa != PK_OPTS_OK)
        return pa;
    if (!a->policy) {
        fprintf(stderr, "pkgym eval: --policy replay:DIR or cmd:PROGRAM is required\n");
        return -1;
    }
    if (a->server && (a->data_dir || a->n_serve_args)) {
        fprintf(stderr, "pkgym eval: --data-dir and --serve-arg are for the embedded server; "
                        "with --server the store is that server's --data-dir\n");
        return -1;
    }
    if (a->compare_examples && !a->examples) {
        fprintf(stderr, "pkgym eval: --compare-examples needs --examples JSON\n");
        return -1;
    }
    pk_error err;
    char *options = pk_eval_reset_options(a, 1, &err); /* both JSON texts, checked now */
    if (!options) {
        fprintf(stderr, "pkgym eval: %s\n", err.message);
        return -1;
    }
    free(options);
    if (!a->run_id[0])
        make_run_id(a->run_id, sizeof a->run_id);
    settle_k(a);
    return 0;
}
