/* `pkgym check --problem ID FILE [--json] [--gpus LIST] [--trials N] ...`: evaluates one
 * submission locally and prints the feedback and the result. */
#include "pk_cli_load.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: pkgym check --problem ID FILE [--json] [--gpus LIST] [--trials N]\n"
            "                   [--world-size N] [--launcher fork|mpi] [--seed N]\n"
            "                   [--skip-timing] [--reference] [--keep] [--timeout-ms MS]\n"
            "                   [--baseline-us US] [--no-warm] [--dump DIR] [--dims SPEC]\n"
            "                   [--regime NAME] [--lock-dir DIR | --no-locks]\n\n"
            "Compiles FILE (one CUDA C++ source defining the problem's entry point), checks its\n"
            "symbols, runs every rank in the sandbox (correctness trials, then timing against\n"
            "the reference) and prints the verdict. --json prints the result as JSON.\n"
            "--reference times the reference against itself (FILE is not needed).\n"
            "--baseline-us uses a cached reference time instead of timing the reference.\n"
            "The run sandbox is started during the compile (ranks set up devices and\n"
            "communicators, then wait for the compiled object); --no-warm starts it after.\n"
            "--dump DIR writes every trial's inputs and reference outputs, per rank, as raw\n"
            "little-endian arrays with DIR/manifest.json (for bench/pkb-crosscheck).\n"
            "--dims overrides dims: NAME=VALUE,... or a preset of the problem's meta.json\n"
            "\"dims_presets\" (e.g. pkb: ParallelKernelBench's own base shape).\n"
            "--regime draws every input that allows it from one regime (iid: PKB's own inputs;\n"
            "rank, row, heavy, peaked, cancel); by default each call's regime is secret.\n"
            "Timing holds the job's GPUs exclusively against every other job of the machine\n"
            "(per-GPU locks in --lock-dir, default $PKGYM_LOCK_DIR or /tmp/pkgym-locks-<uid>;\n"
            "trials hold them shared); --no-locks takes none. A host problem takes the locks\n"
            "of the --gpus it is given (none by default).\n"
            "Exit status: 0 when a verdict was produced (whatever it is), 1 when the harness\n"
            "failed, 2 on bad usage.\n");
}

static int parse_gpus(const char *s, pk_eval_opts *o) {
    o->n_gpus = 0;
    while (*s && o->n_gpus < PK_EVAL_MAX_RANKS) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 0)
            return -1;
        o->gpus[o->n_gpus++] = (int)v;
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',')
            return -1;
    }
    return 0;
}

static void print_feedback(const pk_eval_result *r) {
    printf("status: %s\n", pk_status_name(r->status));
    if (r->reason[0])
        printf("reason: %s\n", r->reason);
    if (r->rule[0])
        printf("rule: %s\n", r->rule);
    for (int i = 0; i < r->n_checks; i++)
        if (!r->checks[i].passed)
            printf("check failed: %s: %s\n", r->checks[i].name, r->checks[i].detail);
    for (int i = 0; i < r->n_trials; i++)
        printf("trial %d: %s (max abs err %g, max rel err %g)\n", i,
               r->trials[i].passed ? "pass" : "FAIL", r->trials[i].max_abs_err,
               r->trials[i].max_rel_err);
    if (r->has_timing)
        printf("time: candidate %.2f us (cv %.3f), baseline %.2f us (cv %.3f, %s), speedup "
               "%.3f\n",
               r->candidate.median_us, r->candidate.cv, r->baseline.us, r->baseline.cv,
               r->baseline.cached ? "cached: the reference was not timed" : "reference timed now",
               r->speedup);
    if (r->roofline_floor_us > 0 || r->roofline_no_overlap_us > 0)
        printf("roofline: floor %.2f us (perfect overlap; no kernel can beat it), no-overlap "
               "%.2f us (phases one after another)\n",
               r->roofline_floor_us, r->roofline_no_overlap_us);
    const pk_stage_times *s = &r->stages;
    printf("stages (ms): prepare %.1f, compile %.1f, symbols %.1f, run %.1f (setup %.1f [init "
           "%.1f, arena %.1f], check %.1f, timing %.1f [held %.1f, expected %.1f]), warm-up "
           "hidden %.1f, total %.1f\n",
           s->prepare_ms, s->compile_ms, s->symbols_ms, s->run_ms, s->run_setup_ms, s->run_init_ms,
           s->run_arena_ms, s->run_check_ms, s->run_timing_ms, s->run_timing_hold_ms,
           s->run_timing_expect_ms, s->run_warm_ms, s->total_ms);
    if (r->status == PK_STATUS_COMPILE_ERROR && r->compile_log)
        printf("--- compile log ---\n%s\n", r->compile_log);
    if (r->stdout_tail && *r->stdout_tail)
        printf("--- stdout (tail; feedback only) ---\n%s\n", r->stdout_tail);
    if (r->stderr_tail && *r->stderr_tail)
        printf("--- stderr (tail) ---\n%s\n", r->stderr_tail);
}

int pk_cmd_check(int argc, char **argv) {
    const char *id = NULL, *file = NULL, *dump = NULL;
    char dump_abs[PATH_MAX];
    int json = 0;
    pk_eval_opts o;
    pk_eval_opts_default(&o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "--skip-timing")) {
            o.skip_timing = 1;
        } else if (!strcmp(a, "--reference")) {
            o.reference_as_candidate = 1;
        } else if (!strcmp(a, "--keep")) {
            o.keep_workdir = 1;
        } else if (!strcmp(a, "--no-warm")) {
            o.no_warm = 1;
        } else if (!strcmp(a, "--no-locks")) {
            o.no_locks = 1;
        } else if (!strcmp(a, "--lock-dir") && v) {
            o.lock_dir = argv[++i];
        } else if (!strcmp(a, "--problem") && v) {
            id = argv[++i];
        } else if (!strcmp(a, "--trials") && v) {
            o.trials = atoi(argv[++i]);
        } else if (!strcmp(a, "--baseline-us") && v) {
            o.baseline_us = atof(argv[++i]);
        } else if (!strcmp(a, "--timeout-ms") && v) {
            o.run_timeout_ms = atoi(argv[++i]);
        } else if (!strcmp(a, "--world-size") && v) {
            o.world_size = atoi(argv[++i]);
        } else if (!strcmp(a, "--seed") && v) {
            o.seed = strtoull(argv[++i], NULL, 0);
        } else if (!strcmp(a, "--dims") && v) {
            o.dims = argv[++i];
        } else if (!strcmp(a, "--regime") && v) {
            o.regime = argv[++i];
            if (pk_regime_from_name(o.regime) < 0) {
                fprintf(stderr, "pkgym check: unknown regime %s\n", o.regime);
                return 2;
            }
        } else if (!strcmp(a, "--dump") && v) {
            dump = argv[++i];
        } else if (!strcmp(a, "--launcher") && v) {
            o.launcher = argv[++i];
        } else if (!strcmp(a, "--gpus") && v) {
            if (parse_gpus(argv[++i], &o)) {
                usage(stderr);
                return 2;
            }
        } else if (a[0] != '-' && !file) {
            file = a;
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (!id || (!file && !o.reference_as_candidate)) {
        usage(stderr);
        return 2;
    }
    if (dump) {
        pk_error derr;
        if (pk_mkdir_p(dump, &derr) || !realpath(dump, dump_abs)) {
            fprintf(stderr, "pkgym check: cannot create the dump directory %s\n", dump);
            return 1;
        }
        o.dump_dir = dump_abs;
    }
    pk_error err;
    pk_problem_set *set;
    if (pk_cli_load_problems(&set))
        return 1;
    pk_problem *p = (pk_problem *)pk_problem_set_find(set, id);
    if (p && o.dims && pk_problem_override_dims(p, o.dims, &err)) { /* this command's copy */
        fprintf(stderr, "pkgym check: %s\n", err.message);
        pk_problem_set_free(set);
        return 1;
    }
    if (!p) {
        fprintf(stderr, "pkgym check: no problem %s (see 'pkgym problems')\n", id);
        pk_problem_set_free(set);
        return 1;
    }
    char *source = NULL;
    if (file && pk_read_file(file, &source, NULL, &err)) {
        fprintf(stderr, "pkgym check: %s\n", err.message);
        pk_problem_set_free(set);
        return 1;
    }
    pk_eval_result res;
    pk_eval_result_init(&res);
    int rc = pk_harness_evaluate(p, source, &o, &res, &err);
    if (rc) {
        fprintf(stderr, "pkgym check: harness failure: %s\n", err.message);
    } else if (json) {
        char *text = pk_eval_result_to_json(&res);
        printf("%s\n", text ? text : "{}");
        free(text);
    } else {
        print_feedback(&res);
    }
    pk_eval_result_free(&res);
    free(source);
    pk_problem_set_free(set);
    return rc ? 1 : 0;
}
