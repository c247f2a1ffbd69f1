/* `pkgym serve`: options, signals, and the server's lifetime. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pk_cli_args.h"
#include "pk_opts.h"
#include "pk_env.h"
#include "pk_stop_signals.h"
#include "server.h"

#define N_OPTS 45

/* The defaults that are known only at run time, for the help text. */
static char help_bind[128], help_problems[1200], help_modules[1200], help_data[256],
    help_templates[1200];

static int parse_visibility(const char *cmd, const char *name, const char *value, void *dest) {
    int v = pk_rank_visibility_parse(value);
    if (v < 0) {
        fprintf(stderr, "pkgym %s: %s wants own or all, got '%s'\n", cmd, name, value);
        return -1;
    }
    *(int *)dest = v;
    return 0;
}

static void options(pk_server_opts *o, pk_opt t[N_OPTS]) {
    snprintf(help_bind, sizeof help_bind, "ZeroMQ endpoint; repeatable (default %s)",
             PK_DEFAULT_ENDPOINT);
    snprintf(help_problems, sizeof help_problems, "problems root (default %s)",
             pk_problems_default_dir());
    snprintf(help_modules, sizeof help_modules, "compiled problem modules (default %s)",
             pk_problems_default_modules_dir());
    snprintf(help_data, sizeof help_data, "trajectory store and caches (default %s)",
             PK_DEFAULT_DATA_DIR);
    snprintf(help_templates, sizeof help_templates, "feedback templates (default %s)",
             pk_summarizer_default_templates_dir());
    const pk_opt rows[N_OPTS] = {
        {.type = PK_OPT_STR_LIST,
         .name = "--bind",
         .metavar = "ENDPOINT",
         .help = help_bind,
         .dest = o->binds,
         .count = &o->n_binds,
         .max = PK_MAX_BINDS},
        {.type = PK_OPT_STR,
         .name = "--problems",
         .metavar = "DIR",
         .help = help_problems,
         .dest = &o->problems_dir},
        {.type = PK_OPT_STR,
         .name = "--modules",
         .metavar = "DIR",
         .help = help_modules,
         .dest = &o->modules_dir},
        {.type = PK_OPT_STR,
         .name = "--data-dir",
         .metavar = "DIR",
         .help = help_data,
         .dest = &o->data_dir},
        {.type = PK_OPT_STR,
         .name = "--reward-config",
         .metavar = "FILE",
         .help = "JSON reward settings over the defaults",
         .dest = &o->reward_config_path},
        {.type = PK_OPT_STR,
         .name = "--feedback-config",
         .metavar = "FILE",
         .help = "JSON feedback settings over the defaults",
         .dest = &o->feedback_config_path},
        {.type = PK_OPT_STR,
         .name = "--templates",
         .metavar = "DIR",
         .help = help_templates,
         .dest = &o->templates_dir},
        {.type = PK_OPT_SIZE,
         .name = "--max-action-bytes",
         .metavar = "N",
         .help = "limit of one step's action (default 1048576)",
         .dest = &o->max_action_bytes,
         .lo = 1,
         .hi = 64L << 20},
        {.type = PK_OPT_INT,
         .name = "--max-episodes",
         .metavar = "N",
         .help = "open episodes at most (default 4096)",
         .dest = &o->max_episodes,
         .lo = 1,
         .hi = 1000000},
        {.type = PK_OPT_SECONDS,
         .name = "--episode-idle-s",
         .metavar = "S",
         .help = "close episodes idle this long (default 3600)",
         .dest = &o->episode_idle_s,
         .lo = 1,
         .hi = 86400 * 30},
        {.type = PK_OPT_INT,
         .name = "--max-turns",
         .metavar = "N",
         .help = "the largest max_turns reset accepts (default 64)",
         .dest = &o->max_turns_limit,
         .lo = 1,
         .hi = 1000},
        {.type = PK_OPT_INT,
         .name = "--compile-workers",
         .metavar = "N",
         .help = "compile workers (default: cores - 1)",
         .dest = &o->compile_workers,
         .lo = 0,
         .hi = 1024},
        {.type = PK_OPT_INT,
         .name = "--queue-limit",
         .metavar = "N",
         .help = "evaluations queued at most (default 1024)",
         .dest = &o->queue_limit,
         .lo = 1,
         .hi = 1000000},
        {.type = PK_OPT_INT_LIST,
         .name = "--gpus",
         .metavar = "LIST",
         .help = "GPU indices, e.g. 0,1, or 'none' (default: all)",
         .dest = o->gpus,
         .lo = 0,
         .hi = 1023,
         .count = &o->n_gpus,
         .max = PK_SCHED_MAX_GPUS},
        {.type = PK_OPT_INT,
         .name = "--jobs-per-gpu",
         .metavar = "N",
         .help = "jobs resident on one GPU at once (default 8; 1: each\n"
                 "job has its GPUs to itself); timing holds them alone",
         .dest = &o->jobs_per_gpu,
         .lo = 1,
         .hi = 64},
        {.type = PK_OPT_CUSTOM,
         .name = "--rank-visibility",
         .metavar = "own|all",
         .help = "GPU jobs: each rank process sees only its own GPU (own) or\n"
                 "all the job's (all); default $PKGYM_RANK_VISIBILITY, else all",
         .dest = &o->rank_visibility,
         .parse = parse_visibility},
        {.type = PK_OPT_LONG,
         .name = "--gpu-mem-mb",
         .metavar = "N",
         .help = "device memory those jobs may use per GPU (default 90%\n"
                 "of the free memory at start; -1: not counted)",
         .dest = &o->gpu_mem_mb,
         .lo = -1,
         .hi = 1L << 30},
        {.type = PK_OPT_INT,
         .name = "--shutdown-grace-ms",
         .metavar = "N",
         .help = "on SIGINT/SIGTERM, queued and running work goes on this\n"
                 "long, then the rest is cancelled (default 10000)",
         .dest = &o->shutdown_grace_ms,
         .lo = 0,
         .hi = 3600000},
        {.type = PK_OPT_FLAG,
         .name = "--remeasure-baseline",
         .help = "time the reference on every step; never use the baseline\n"
                 "cache (DIR/cache/baseline)",
         .dest = &o->remeasure_baseline},
        {.type = PK_OPT_POSITIVE,
         .name = "--baseline-max-cv",
         .metavar = "X",
         .help = "a cached baseline whose CV is above X is measured again,\n"
                 "and a measurement above X is not cached (default 0.1)",
         .dest = &o->baseline_max_cv},
        {.type = PK_OPT_POSITIVE,
         .name = "--baseline-max-age-s",
         .metavar = "S",
         .help = "a cached baseline older than S seconds is measured again\n(default 86400)",
         .dest = &o->baseline_max_age_s},
        {.type = PK_OPT_SECTION, .help = "Profiles (docs/feedback.md, \"Profiles\"):"},
        {.type = PK_OPT_INT,
         .name = "--profile-per-minute",
         .metavar = "N",
         .help = "at most N profiles (reset's options.profile) start per\n"
                 "minute on this server; over it a step says profile skipped\n"
                 "(budget) (default 0: profiling off, options.profile refused)",
         .dest = &o->profile_per_minute,
         .lo = 0,
         .hi = 600},
        {.type = PK_OPT_SECONDS,
         .name = "--profile-seconds",
         .metavar = "S",
         .help = "time limit of one profile, both profiler runs (default 120)",
         .dest = &o->profile_seconds,
         .lo = 1,
         .hi = 600},
        {.type = PK_OPT_SECTION, .help = "Remote workers (docs/scale-out.md):"},
        {.type = PK_OPT_STR_LIST,
         .name = "--worker-bind",
         .metavar = "ENDPOINT",
         .help = "accept `pkgym worker`s here (e.g. tcp://0.0.0.0:5600);\n"
                 "repeatable. Jobs then go to the workers, and to an\n"
                 "in-process worker on this host's GPUs unless --gpus none\n"
                 "(a pure broker). A non-loopback tcp:// one needs CURVE\n"
                 "(--worker-curve-allow) or --insecure",
         .dest = o->worker_binds,
         .count = &o->n_worker_binds,
         .max = PK_MAX_BINDS - 1},
        {.type = PK_OPT_INT,
         .name = "--worker-heartbeat-ms",
         .metavar = "N",
         .help = "heartbeat interval both ways (default 1000)",
         .dest = &o->worker_heartbeat_ms,
         .lo = 10,
         .hi = 600000},
        {.type = PK_OPT_INT,
         .name = "--worker-liveness",
         .metavar = "N",
         .help = "silent heartbeats before a worker is lost (default 5)",
         .dest = &o->worker_liveness,
         .lo = 2,
         .hi = 1000},
        {.type = PK_OPT_SECONDS,
         .name = "--worker-wait-s",
         .metavar = "S",
         .help = "a job waits this long for a worker able to run it\n"
                 "(default 120), then fails with `internal`",
         .dest = &o->worker_wait_s,
         .lo = 1,
         .hi = 86400},
        {.type = PK_OPT_SECTION, .help = "Clients:"},
        {.type = PK_OPT_INT,
         .name = "--max-client-episodes",
         .metavar = "N",
         .help = "open episodes per client (default 1024)",
         .dest = &o->max_client_episodes,
         .lo = 1,
         .hi = 1000000},
        {.type = PK_OPT_INT,
         .name = "--max-client-steps",
         .metavar = "N",
         .help = "steps in flight per client (default 256)",
         .dest = &o->max_client_steps,
         .lo = 1,
         .hi = 1000000},
        {.type = PK_OPT_SECONDS,
         .name = "--episode-orphan-s",
         .metavar = "S",
         .help = "expire a client's episodes this long after it\ndisconnected (default 300)",
         .dest = &o->episode_orphan_s,
         .lo = 1,
         .hi = 86400 * 30},
        {.type = PK_OPT_SIZE,
         .name = "--max-episode-bytes",
         .metavar = "N",
         .help = "memory one episode may hold (default 64 MiB)",
         .dest = &o->max_episode_bytes,
         .lo = 4096,
         .hi = LONG_MAX},
        {.type = PK_OPT_SIZE,
         .name = "--max-client-bytes",
         .metavar = "N",
         .help = "memory one client's episodes may hold (default 1 GiB)",
         .dest = &o->max_client_bytes,
         .lo = 4096,
         .hi = LONG_MAX},
        {.type = PK_OPT_SIZE,
         .name = "--max-held-bytes",
         .metavar = "N",
         .help = "memory all episodes may hold (default 4 GiB)",
         .dest = &o->max_held_bytes,
         .lo = 4096,
         .hi = LONG_MAX},
        {.type = PK_OPT_SECTION,
         .help = "Hooks (docs/feedback.md; clients choose them by name in reset's options):"},
        {.type = PK_OPT_STR_LIST,
         .name = "--hook",
         .metavar = "NAME=plugin:/abs/x.so | NAME=cmd:/abs/prog",
         .help = "register a hook; repeatable",
         .dest = o->hook_args,
         .count = &o->n_hook_args,
         .max = PK_MAX_HOOK_ARGS},
        {.type = PK_OPT_SECTION, .help = "Security (docs/security.md):"},
        {.type = PK_OPT_STR,
         .name = "--curve-secret-key",
         .metavar = "FILE",
         .help = "the server's key pair (pkgym keygen), for clients and\nworkers",
         .dest = &o->curve_secret_key},
        {.type = PK_OPT_STR,
         .name = "--curve-allow",
         .metavar = "DIR",
         .help = "public keys of the clients allowed in: CURVE on every\ntcp:// --bind",
         .dest = &o->curve_allow},
        {.type = PK_OPT_STR,
         .name = "--worker-curve-allow",
         .metavar = "DIR",
         .help = "public keys of the workers allowed in: CURVE on every\n"
                 "tcp:// --worker-bind (both directories are read again\n"
                 "when they change)",
         .dest = &o->worker_curve_allow},
        {.type = PK_OPT_FLAG,
         .name = "--insecure",
         .help = "allow a non-loopback tcp:// endpoint (clients' or\nworkers') without CURVE",
         .dest = &o->insecure},
    };
    memcpy(t, rows, sizeof rows);
}

static void usage(FILE *f, const pk_opt *t) {
    fprintf(f, "usage: pkgym serve [options]\n\n"
               "Serves protocol v1 (docs/protocol.md) on a ZeroMQ ROUTER socket.\n\n");
    pk_opts_help(f, t, N_OPTS);
}

/* Returns 0, 1 for --help, -1 on a bad option. */
static int parse_args(int argc, char **argv, pk_server_opts *o, const pk_opt *t) {
    int pa = pk_opts_parse("serve", t, N_OPTS, argc, argv, 1, 0, NULL);
    if (pa != PK_OPTS_OK)
        return pa;
    if (o->n_binds == 0)
        o->binds[o->n_binds++] = PK_DEFAULT_ENDPOINT;
    return 0;
}

/* After the stop signal, the grace, and this much for running stages and the store: then the
 * server exits at once (issue 27, finding 8: a candidate that hangs, or a client's long
 * run_timeout_ms, kept it up for minutes). Its sandboxes die with it (PR_SET_PDEATHSIG); the
 * steps still in flight are in the journal, answered as after any crash (docs/protocol.md). */
#define PK_SHUTDOWN_SLACK_MS 10000
#define PK_EXIT_SHUTDOWN_BOUND 3

typedef struct shutdown_bound {
    volatile sig_atomic_t *stop;
    int grace_ms;
    atomic_int done;
} shutdown_bound;

static void *shutdown_bound_main(void *arg) {
    shutdown_bound *b = arg;
    const struct timespec tick = {0, 100 * 1000 * 1000};
    while (!*b->stop && !atomic_load(&b->done))
        nanosleep(&tick, NULL);
    double limit_ms = pk_now_ms() + b->grace_ms + PK_SHUTDOWN_SLACK_MS;
    while (!atomic_load(&b->done)) {
        if (pk_now_ms() >= limit_ms) {
            fprintf(stderr,
                    "pkgym serve: still stopping %d ms after the signal (grace %d ms): exiting "
                    "now; steps still being evaluated get their answer at the next start\n",
                    b->grace_ms + PK_SHUTDOWN_SLACK_MS, b->grace_ms);
            _exit(PK_EXIT_SHUTDOWN_BOUND);
        }
        nanosleep(&tick, NULL);
    }
    return NULL;
}

int pk_cmd_serve(int argc, char **argv) {
    pk_server_opts o;
    pk_server_opts_default(&o);
    pk_opt t[N_OPTS];
    options(&o, t);
    int pa = parse_args(argc, argv, &o, t);
    if (pa) {
        if (pa > 0)
            usage(stdout, t);
        else
            fprintf(stderr, "usage: pkgym serve [options]  (--help: the options)\n");
        return pa > 0 ? 0 : 2;
    }
    /* Block the stop signals while the ZeroMQ and scheduler threads start, so they inherit the
     * mask and only this thread (the poll loop) sees SIGINT/SIGTERM. */
    sigset_t old;
    volatile sig_atomic_t *stop_requested = pk_stop_signals_catch(&old);

    pk_server *s = calloc(1, sizeof *s);
    pk_error err;
    pk_error_clear(&err);
    int rc = s ? pk_server_init(s, &o, stop_requested, &err) : PK_ERR_NOMEM;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) {
        fprintf(stderr, "pkgym serve: %s\n", s ? err.message : "out of memory");
        if (s)
            pk_server_free(s);
        free(s);
        return 1;
    }
    fprintf(stderr, "pkgym serve: protocol 1, %zu problem(s), %zu GPU(s), listening on",
            pk_problem_set_count(s->problems), json_array_size(s->gpus));
    for (int i = 0; i < o.n_binds; i++)
        fprintf(stderr, " %s", o.binds[i]);
    if (o.n_worker_binds) {
        fprintf(stderr, "; workers on");
        for (int i = 0; i < o.n_worker_binds; i++)
            fprintf(stderr, " %s", o.worker_binds[i]);
        fprintf(stderr, o.n_gpus == 0 ? " (pure broker: --gpus none)" : " and an in-process one");
    }
    fprintf(stderr, "\n");
    shutdown_bound b = {.stop = stop_requested, .grace_ms = o.shutdown_grace_ms};
    pthread_t bound_thread;
    sigset_t stops, before;
    sigemptyset(&stops);
    sigaddset(&stops, SIGINT);
    sigaddset(&stops, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stops, &before); /* the signals stay the poll loop's */
    int bounded = pthread_create(&bound_thread, NULL, shutdown_bound_main, &b) == 0;
    pthread_sigmask(SIG_SETMASK, &before, NULL);
    rc = pk_server_run(s);
    pk_server_free(s);
    free(s);
    if (bounded) {
        atomic_store(&b.done, 1);
        pthread_join(bound_thread, NULL);
    }
    fprintf(stderr, "pkgym serve: stopped\n");
    return rc == 0 ? 0 : 1;
}
