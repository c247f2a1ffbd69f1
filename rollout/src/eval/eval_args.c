/* `pkgym eval` options. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "pk_eval_internal.h"
#include "pk_cli_args.h"

void pk_eval_usage(FILE *f) {
    fprintf(
        f,
        "usage: pkgym eval --policy replay:DIR|cmd:PROGRAM [options]\n\n"
        "Scripted multi-turn evaluation: G trajectories x T turns per problem, against a\n"
        "running server (--server) or an embedded `pkgym serve` child on an ipc:// endpoint.\n\n"
        "  --server ENDPOINT      a running server (default: start an embedded one)\n"
        "  --serve-arg ARG        pass ARG to the embedded `pkgym serve`; repeatable\n"
        "  --data-dir DIR         the embedded server's trajectory store and caches, KEPT after\n"
        "                         the run (default OUT/data: OUT/data/trajectories.sqlite, for\n"
        "                         `pkgym reward` and `pkgym export`); with --server the store is\n"
        "                         that server's own --data-dir\n"
        "  --run-id ID            this run's id (default eval-<UTC time>-<random hex>)\n"
        "  --group LABEL          episodes are grouped as LABEL/<problem id> (default: the run\n"
        "                         id), so runs never share a normalization set by accident\n"
        "  --problems SEL         all | tag:TAG | suite:SUITE | ID[,ID...] (default all)\n"
        "  -G, --trajectories N   trajectories per problem (default 4)\n"
        "  -T, --turns N          turns per trajectory (default 4)\n"
        "  --policy SPEC          replay:DIR: DIR/<suite>/<name>/turn<k>.md, or per trajectory\n"
        "                         DIR/<suite>/<name>/traj<g>/turn<k>.md (1-based); a missing\n"
        "                         turn ends the trajectory. cmd:PROGRAM: run by /bin/sh once\n"
        "                         per turn, the observation as JSON on stdin {problem,\n"
        "                         trajectory, turn, prompt, feedback}; its stdout is the action\n"
        "  --out DIR              report directory (default ./pkgym-eval)\n"
        "  --options JSON         reset options for every episode (e.g. "
        "'{\"stop_on_correct\":true}')\n"
        "  --k LIST               k values for pass@k, best@k, avg@k (default 1,G)\n"
        "  --seed N               seed of every episode (default: each drawn by the server;\n"
        "                         report.json records every episode's seed)\n"
        "  --noisy-cv X           flag speedups whose candidate or baseline CV is above X\n"
        "                         (default 0.1); the report warns where they set a best speedup\n"
        "  --concurrency N        episodes open at once (default 64)\n"
        "  --policy-jobs N        cmd policy processes at once (default 4)\n"
        "  --step-timeout-s S     wait for one step's reply at most S (default 900)\n"
        "  --policy-timeout-s S   one cmd policy call at most S (default 600)\n"
        "  --transcript           print every step: status, reward, feedback, returns\n"
        "  --quiet                no progress and no summary on stdout\n\n"
        "Writes OUT/report.json (settings with the run id and the store, every trajectory's\n"
        "episode id, group, seed and turns), OUT/report.md, OUT/turn_scaling.svg and, with an\n"
        "embedded server, OUT/serve.log. Problems the server cannot run (a GPU problem on a\n"
        "server with too few GPUs) or the policy has no responses for are left out, and the\n"
        "report says why; the summary counts only the problems that ran. Exit status: 0 when\n"
        "every trajectory ran, 3 when some stopped on an error, 2 on bad usage, no server, or\n"
        "no problem that can run. A trajectory stopped by infra_error (the server's failure,\n"
        "after one more try) is left out of every figure and counted as infra_dropped.\n");
}

static int parse_int(const char *opt, const char *v, long lo, long hi, long *out) {
    return pk_arg_long("eval", opt, v, lo, hi, out);
}

static int parse_positive(const char *opt, const char *v, const char *what, double *out) {
    return pk_arg_positive("eval", opt, v, what, out);
}

static int parse_seconds(const char *opt, const char *v, double *out) {
    return parse_positive(opt, v, "number of seconds", out);
}

static int parse_k(const char *v, pk_eval_args *a) {
    char *copy = strdup(v);
    int rc = copy ? 0 : -1;
    a->n_k = 0;
    for (char *save = NULL, *tok = copy ? strtok_r(copy, ",", &save) : NULL; tok && !rc;
         tok = strtok_r(NULL, ",", &save)) {
        long k;
        if (a->n_k >= PK_EVAL_MAX_K || parse_int("--k", tok, 1, 1000000, &k))
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

static int flag(const char *a, const char *name) {
    return strcmp(a, name) == 0;
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
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (flag(o, "--help") || flag(o, "-h")) {
            pk_eval_usage(stdout);
            return 1;
        }
        if (flag(o, "--transcript")) {
            a->transcript = 1;
            continue;
        }
        if (flag(o, "--quiet")) {
            a->quiet = 1;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "pkgym eval: unknown option or missing value: %s\n", o);
            return -1;
        }
        const char *v = argv[++i];
        long n = 0;
        int rc = 0;
        if (flag(o, "--server"))
            a->server = v;
        else if (flag(o, "--serve-arg")) {
            if (a->n_serve_args >= PK_EVAL_MAX_SERVE_ARGS) {
                fprintf(stderr, "pkgym eval: at most %d --serve-arg\n", PK_EVAL_MAX_SERVE_ARGS);
                return -1;
            }
            a->serve_args[a->n_serve_args++] = v;
        } else if (flag(o, "--problems"))
            a->problems = v;
        else if (flag(o, "-G") || flag(o, "--trajectories"))
            rc = parse_int(o, v, 1, 100000, &n), a->trajectories = (int)n;
        else if (flag(o, "-T") || flag(o, "--turns"))
            rc = parse_int(o, v, 1, 1000, &n), a->turns = (int)n;
        else if (flag(o, "--policy"))
            a->policy = v;
        else if (flag(o, "--out"))
            a->out_dir = v;
        else if (flag(o, "--options"))
            a->options = v;
        else if (flag(o, "--k"))
            rc = parse_k(v, a);
        else if (flag(o, "--seed"))
            rc = parse_int(o, v, 0, 0x7fffffffL, &n), a->seed = n;
        else if (flag(o, "--concurrency"))
            rc = parse_int(o, v, 1, 100000, &n), a->concurrency = (int)n;
        else if (flag(o, "--policy-jobs"))
            rc = parse_int(o, v, 1, 1024, &n), a->policy_jobs = (int)n;
        else if (flag(o, "--step-timeout-s"))
            rc = parse_seconds(o, v, &a->step_timeout_s);
        else if (flag(o, "--policy-timeout-s"))
            rc = parse_seconds(o, v, &a->policy_timeout_s);
        else if (flag(o, "--data-dir"))
            a->data_dir = v;
        else if (flag(o, "--run-id")) {
            rc = label_ok(o, v, sizeof a->run_id - 1);
            if (!rc)
                snprintf(a->run_id, sizeof a->run_id, "%s", v);
        } else if (flag(o, "--group"))
            rc = label_ok(o, v, 128), a->group = v;
        else if (flag(o, "--noisy-cv"))
            rc = parse_positive(o, v, "number", &a->noisy_cv);
        else {
            fprintf(stderr, "pkgym eval: unknown option: %s (see --help)\n", o);
            return -1;
        }
        if (rc)
            return -1;
    }
    if (!a->policy) {
        fprintf(stderr, "pkgym eval: --policy replay:DIR or cmd:PROGRAM is required\n");
        return -1;
    }
    if (a->server && (a->data_dir || a->n_serve_args)) {
        fprintf(stderr, "pkgym eval: --data-dir and --serve-arg are for the embedded server; "
                        "with --server the store is that server's --data-dir\n");
        return -1;
    }
    if (!a->run_id[0])
        make_run_id(a->run_id, sizeof a->run_id);
    settle_k(a);
    return 0;
}
