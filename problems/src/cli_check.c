/* `pkgym check --problem ID FILE [--json] [--gpus LIST] [--trials N] ...`: evaluates one
 * submission locally and prints the feedback and the result. */
#include "pk_cli_load.h"

#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_opts.h"
#include "pk_profile.h"

/* --launcher: the problem's launchers are fork and mpi. */
static int parse_launcher(const char *cmd, const char *name, const char *value, void *dest) {
    if (strcmp(value, "fork") != 0 && strcmp(value, "mpi") != 0) {
        fprintf(stderr, "pkgym %s: %s wants fork or mpi, got '%s'\n", cmd, name, value);
        return -1;
    }
    *(const char **)dest = value;
    return 0;
}

/* --seed: a whole number, 64 bits (0: drawn from getrandom). */
static int parse_seed(const char *cmd, const char *name, const char *value, void *dest) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(value, &end, 0);
    if (!*value || *end || errno || value[0] == '-') {
        fprintf(stderr, "pkgym %s: %s wants a whole number (64 bits), got '%s'\n", cmd, name,
                value);
        return -1;
    }
    *(uint64_t *)dest = (uint64_t)v;
    return 0;
}

/* --regime: one of the input regimes (docs/problems.md, "Input regimes"). */
static int parse_regime(const char *cmd, const char *name, const char *value, void *dest) {
    if (pk_regime_from_name(value) < 0) {
        fprintf(stderr, "pkgym %s: %s wants iid, rank, row, heavy, peaked or cancel, got '%s'\n",
                cmd, name, value);
        return -1;
    }
    *(const char **)dest = value;
    return 0;
}

/* --profile: none, summary or full (docs/feedback.md, "Profiles"). */
static int parse_profile(const char *cmd, const char *name, const char *value, void *dest) {
    int level = pk_profile_level_parse(value);
    if (level < 0) {
        fprintf(stderr, "pkgym %s: %s wants none, summary or full, got '%s'\n", cmd, name, value);
        return -1;
    }
    *(int *)dest = level;
    return 0;
}

typedef struct check_args {
    const char *id, *dump, *svg;
    int json;
    double profile_s;
    pk_eval_opts o;
} check_args;

static int parse_visibility(const char *cmd, const char *name, const char *value, void *dest) {
    int v = pk_rank_visibility_parse(value);
    if (v < 0) {
        fprintf(stderr, "pkgym %s: %s wants own or all, got '%s'\n", cmd, name, value);
        return -1;
    }
    *(int *)dest = v;
    return 0;
}

enum { N_OPTS = 22 };

static void options_table(pk_opt *t, check_args *a) {
    pk_eval_opts *o = &a->o;
    const pk_opt rows[N_OPTS] = {
        {.type = PK_OPT_STR,
         .name = "--problem",
         .metavar = "ID",
         .help = "the problem (pkgym problems list); required",
         .dest = &a->id},
        {.type = PK_OPT_FLAG,
         .name = "--json",
         .help = "print the result as JSON",
         .dest = &a->json},
        {.type = PK_OPT_INT_LIST,
         .name = "--gpus",
         .metavar = "LIST",
         .help = "the job's GPUs, one a rank (default 0..world-1)",
         .dest = o->gpus,
         .lo = 0,
         .hi = 1023,
         .count = &o->n_gpus,
         .max = PK_EVAL_MAX_RANKS},
        {.type = PK_OPT_INT,
         .name = "--trials",
         .metavar = "N",
         .help = "correctness trials (default the problem's)",
         .dest = &o->trials,
         .lo = 1,
         .hi = PK_EVAL_MAX_TRIALS},
        {.type = PK_OPT_INT,
         .name = "--world-size",
         .metavar = "N",
         .help = "ranks, one of the problem's world sizes (default its own); 1 with "
                 "--reference: a single-GPU diagnostic of the reference's numerics",
         .dest = &o->world_size,
         .lo = 1,
         .hi = PK_EVAL_MAX_RANKS},
        {.type = PK_OPT_CUSTOM,
         .name = "--launcher",
         .metavar = "fork|mpi",
         .help = "how ranks start (default the problem's)",
         .dest = &o->launcher,
         .parse = parse_launcher},
        {.type = PK_OPT_CUSTOM,
         .name = "--seed",
         .metavar = "N",
         .help = "the step's secret seed (default drawn from getrandom)",
         .dest = &o->seed,
         .parse = parse_seed},
        {.type = PK_OPT_FLAG,
         .name = "--skip-timing",
         .help = "correctness only",
         .dest = &o->skip_timing},
        {.type = PK_OPT_FLAG,
         .name = "--reference",
         .help = "time the reference against itself (FILE is not needed)",
         .dest = &o->reference_as_candidate},
        {.type = PK_OPT_FLAG,
         .name = "--keep",
         .help = "keep the job directory",
         .dest = &o->keep_workdir},
        {.type = PK_OPT_INT,
         .name = "--timeout-ms",
         .metavar = "MS",
         .help = "the run's time limit (default 60000)",
         .dest = &o->run_timeout_ms,
         .lo = 100,
         .hi = 3600000},
        {.type = PK_OPT_POSITIVE,
         .name = "--baseline-us",
         .metavar = "US",
         .help = "a cached reference time instead of timing the reference",
         .dest = &o->baseline_us},
        {.type = PK_OPT_FLAG,
         .name = "--no-warm",
         .help = "start the run sandbox after the compile, not during it",
         .dest = &o->no_warm},
        {.type = PK_OPT_STR,
         .name = "--dump",
         .metavar = "DIR",
         .help = "write every trial's inputs and reference outputs, per rank, as\n"
                 "raw little-endian arrays with DIR/manifest.json (bench/pkb-crosscheck)",
         .dest = &a->dump},
        {.type = PK_OPT_STR,
         .name = "--dims",
         .metavar = "SPEC",
         .help = "override dims: NAME=VALUE,... or a preset of meta.json's\n"
                 "\"dims_presets\" (pkb: ParallelKernelBench's own base shape)",
         .dest = &o->dims},
        {.type = PK_OPT_CUSTOM,
         .name = "--regime",
         .metavar = "NAME",
         .help = "draw every input that allows it from one regime (iid: PKB's own\n"
                 "inputs; rank, row, heavy, peaked, cancel); default: each call's\n"
                 "regime is secret",
         .dest = &o->regime,
         .parse = parse_regime},
        {.type = PK_OPT_STR,
         .name = "--lock-dir",
         .metavar = "DIR",
         .help = "the per-GPU timing locks (default $PKGYM_LOCK_DIR or\n"
                 "/tmp/pkgym-locks-<uid>)",
         .dest = &o->lock_dir},
        {.type = PK_OPT_FLAG, .name = "--no-locks", .help = "take no locks", .dest = &o->no_locks},
        {.type = PK_OPT_CUSTOM,
         .name = "--profile",
         .metavar = "LEVEL",
         .help = "after a correct verdict, profile one call (none, summary,\n"
                 "full; docs/feedback.md, \"Profiles\"); never changes the verdict",
         .dest = &o->profile,
         .parse = parse_profile},
        {.type = PK_OPT_SECONDS,
         .name = "--profile-seconds",
         .metavar = "S",
         .help = "time limit of the profile (default 120)",
         .dest = &a->profile_s,
         .lo = 1,
         .hi = 600},
        {.type = PK_OPT_STR,
         .name = "--profile-svg",
         .metavar = "FILE",
         .help = "write the profile's timeline as SVG to FILE",
         .dest = &a->svg},
        {.type = PK_OPT_CUSTOM,
         .name = "--rank-visibility",
         .metavar = "own|all",
         .help = "GPU problems: each rank process sees only its own GPU (own) or\n"
                 "all the job's (all); default $PKGYM_RANK_VISIBILITY, else all",
         .dest = &o->rank_visibility,
         .parse = parse_visibility},
    };
    memcpy(t, rows, sizeof rows);
}

static void usage(FILE *f, const pk_opt *t) {
    pk_opts_synopsis(f, "usage: pkgym check", t, N_OPTS, "[FILE]");
    fprintf(f,
            "\nCompiles FILE (one CUDA C++ source defining the problem's entry point), checks its\n"
            "symbols, runs every rank in the sandbox (correctness trials, then timing against\n"
            "the reference) and prints the verdict. The run sandbox is started during the\n"
            "compile (ranks set up devices and communicators, then wait for the compiled\n"
            "object). Timing holds the job's GPUs exclusively against every other job of the\n"
            "machine (per-GPU locks; trials hold them shared). A host problem takes the locks\n"
            "of the --gpus it is given (none by default).\n"
            "Exit status: 0 when a verdict was produced (whatever it is), 1 when the harness\n"
            "failed, 2 on bad usage.\n\n");
    pk_opts_help(f, t, N_OPTS);
}

/* Options and FILE in any order. Returns 0, 1 for --help, 2 on bad usage (said on stderr). */
static int parse_args(int argc, char **argv, check_args *a, const char **file) {
    pk_opt t[N_OPTS];
    options_table(t, a);
    const char *args[1];
    int n_args = 0;
    int rc = pk_opts_parse_args("check", t, N_OPTS, argc, argv, 1, args, 1, &n_args);
    if (rc == PK_OPTS_HELP) {
        usage(stdout, t);
        return 1;
    }
    if (rc != PK_OPTS_OK)
        return 2;
    *file = n_args ? args[0] : NULL;
    if (!a->id || (!*file && !a->o.reference_as_candidate)) {
        fprintf(stderr, "pkgym check: %s (pkgym check --help)\n",
                !a->id ? "--problem ID is required" : "FILE is required (or --reference)");
        return 2;
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
    if (r->profile.level > 0) {
        printf("profile: %s, %s%s%s (%.1f s)\n", pk_profile_level_name(r->profile.level),
               r->profile.status[0] ? r->profile.status : "none", r->profile.reason[0] ? ": " : "",
               r->profile.reason, r->profile.cost_s);
        if (r->profile.text)
            printf("%s", r->profile.text);
    }
    if (r->stderr_tail && *r->stderr_tail)
        printf("--- stderr (tail) ---\n%s\n", r->stderr_tail);
}

/* --profile-svg: the timeline of the profiled call; an empty timeline when there was none. */
static int write_svg(const pk_eval_result *r, const pk_problem *p, const char *path) {
    pk_profile_data d;
    pk_error err;
    memset(&d, 0, sizeof d);
    if (r->profile.raw && pk_profile_data_from_json(r->profile.raw, &d, &err)) {
        fprintf(stderr, "pkgym check: %s\n", err.message);
        return 1;
    }
    char title[200];
    snprintf(title, sizeof title, "%s, one call, %s", pk_problem_id(p),
             r->profile.status[0] ? r->profile.status : "no profile");
    char *svg = pk_profile_svg(&d, title);
    int rc = svg ? pk_write_file(path, svg, strlen(svg), &err) : PK_ERR_NOMEM;
    if (rc)
        fprintf(stderr, "pkgym check: cannot write %s\n", path);
    free(svg);
    pk_profile_data_free(&d);
    return rc != PK_OK;
}

int pk_cmd_check(int argc, char **argv) {
    const char *file = NULL;
    char dump_abs[PATH_MAX];
    check_args a = {0};
    pk_eval_opts_default(&a.o);
    int prc = parse_args(argc, argv, &a, &file);
    if (prc)
        return prc == 1 ? 0 : 2;
    pk_eval_opts o = a.o;
    o.profile_timeout_s = a.profile_s;
    const char *id = a.id, *dump = a.dump;
    int json = a.json;
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
    if (o.reference_as_candidate && pk_problem_world_is_diagnostic(p, o.world_size))
        fprintf(stderr,
                "pkgym check: world size 1 is not one of %s's world sizes: a single-GPU "
                "diagnostic of the reference (its numerics; no communication is exercised)\n",
                id);
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
    if (!rc && a.svg && write_svg(&res, p, a.svg))
        rc = 1;
    pk_eval_result_free(&res);
    free(source);
    pk_problem_set_free(set);
    return rc ? 1 : 0;
}
