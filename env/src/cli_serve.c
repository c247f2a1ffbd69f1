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
#include "pk_env.h"
#include "pk_stop_signals.h"
#include "server.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: pkgym serve [options]\n\n"
            "Serves protocol v1 (docs/protocol.md) on a ZeroMQ ROUTER socket.\n\n"
            "  --bind ENDPOINT         ZeroMQ endpoint; repeatable (default %s)\n"
            "  --problems DIR          problems root (default %s)\n"
            "  --modules DIR           compiled problem modules (default %s)\n"
            "  --data-dir DIR          trajectory store and caches (default %s)\n"
            "  --reward-config FILE    JSON reward settings over the defaults\n"
            "  --feedback-config FILE  JSON feedback settings over the defaults\n"
            "  --templates DIR         feedback templates (default %s)\n"
            "  --max-action-bytes N    limit of one step's action (default 1048576)\n"
            "  --max-episodes N        open episodes at most (default 4096)\n"
            "  --episode-idle-s S      close episodes idle this long (default 3600)\n"
            "  --max-turns N           the largest max_turns reset accepts (default 64)\n"
            "  --compile-workers N     compile workers (default: cores - 1)\n"
            "  --queue-limit N         evaluations queued at most (default 1024)\n"
            "  --gpus LIST             GPU indices, e.g. 0,1, or 'none' (default: all)\n"
            "  --jobs-per-gpu N        jobs resident on one GPU at once (default 8; 1: each\n"
            "                          job has its GPUs to itself); timing holds them alone\n"
            "  --gpu-mem-mb N          device memory those jobs may use per GPU (default 90%%\n"
            "                          of the free memory at start; -1: not counted)\n"
            "  --shutdown-grace-ms N   on SIGINT/SIGTERM, queued and running work goes on this\n"
            "                          long, then the rest is cancelled (default 10000)\n"
            "  --remeasure-baseline    time the reference on every step; never use the baseline\n"
            "                          cache (DIR/cache/baseline)\n"
            "  --baseline-max-cv X     a cached baseline whose CV is above X is measured again,\n"
            "                          and a measurement above X is not cached (default 0.1)\n"
            "  --baseline-max-age-s S  a cached baseline older than S seconds is measured again\n"
            "                          (default 86400)\n"
            "\n"
            "Remote workers (docs/scale-out.md):\n"
            "  --worker-bind ENDPOINT  accept `pkgym worker`s here (e.g. tcp://0.0.0.0:5600);\n"
            "                          repeatable. Jobs then go to the workers, and to an\n"
            "                          in-process worker on this host's GPUs unless --gpus none\n"
            "                          (a pure broker). A non-loopback tcp:// one needs CURVE\n"
            "                          (--worker-curve-allow) or --insecure\n"
            "  --worker-heartbeat-ms N heartbeat interval both ways (default 1000)\n"
            "  --worker-liveness N     silent heartbeats before a worker is lost (default 5)\n"
            "  --worker-wait-s S       a job waits this long for a worker able to run it\n"
            "                          (default 120), then fails with `internal`\n"
            "\nClients:\n"
            "  --max-client-episodes N open episodes per client (default 1024)\n"
            "  --max-client-steps N    steps in flight per client (default 256)\n"
            "  --episode-orphan-s S    expire a client's episodes this long after it "
            "disconnected (default 300)\n"
            "  --max-episode-bytes N   memory one episode may hold (default 64 MiB)\n"
            "  --max-client-bytes N    memory one client's episodes may hold (default 1 GiB)\n"
            "  --max-held-bytes N      memory all episodes may hold (default 4 GiB)\n"
            "\nHooks (docs/feedback.md; clients choose them by name in reset's options):\n"
            "  --hook NAME=plugin:/abs/x.so | NAME=cmd:/abs/prog   register a hook; "
            "repeatable\n"
            "\nSecurity (docs/security.md):\n"
            "  --curve-secret-key FILE the server's key pair (pkgym keygen), for clients and "
            "workers\n"
            "  --curve-allow DIR       public keys of the clients allowed in: CURVE on every "
            "tcp:// --bind\n"
            "  --worker-curve-allow DIR\n"
            "                          public keys of the workers allowed in: CURVE on every "
            "tcp://\n"
            "                          --worker-bind (both directories are read again when they "
            "change)\n"
            "  --insecure              allow a non-loopback tcp:// endpoint (clients' or "
            "workers') without CURVE\n",
            PK_DEFAULT_ENDPOINT, pk_problems_default_dir(), pk_problems_default_modules_dir(),
            PK_DEFAULT_DATA_DIR, pk_summarizer_default_templates_dir());
}

static int parse_long(const char *opt, const char *v, long lo, long hi, long *out) {
    return pk_arg_long("serve", opt, v, lo, hi, out);
}

static int parse_gpus(const char *v, pk_server_opts *o) {
    o->n_gpus = 0;
    if (strcmp(v, "none") == 0)
        return 0;
    char *copy = strdup(v);
    int rc = copy ? 0 : -1;
    for (char *save = NULL, *tok = copy ? strtok_r(copy, ",", &save) : NULL; tok && !rc;
         tok = strtok_r(NULL, ",", &save)) {
        long g;
        if (o->n_gpus >= PK_SCHED_MAX_GPUS || parse_long("--gpus", tok, 0, 1023, &g))
            rc = -1;
        else
            o->gpus[o->n_gpus++] = (int)g;
    }
    free(copy);
    return rc;
}

static int parse_positive(const char *opt, const char *v, double *out) {
    return pk_arg_positive("serve", opt, v, "number", out);
}

/* Returns 0, 1 for --help, -1 on a bad option. */
static int parse_args(int argc, char **argv, pk_server_opts *o) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
            return 1;
        if (strcmp(a, "--insecure") == 0 || strcmp(a, "--remeasure-baseline") == 0) {
            if (a[2] == 'i')
                o->insecure = 1;
            else
                o->remeasure_baseline = 1;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "pkgym serve: unknown option or missing value: %s\n", a);
            return -1;
        }
        const char *v = argv[++i];
        long n = 0;
        int rc = 0;
        if (strcmp(a, "--bind") == 0) {
            if (o->n_binds >= PK_MAX_BINDS) {
                fprintf(stderr, "pkgym serve: at most %d --bind\n", PK_MAX_BINDS);
                return -1;
            }
            o->binds[o->n_binds++] = v;
        } else if (strcmp(a, "--problems") == 0)
            o->problems_dir = v;
        else if (strcmp(a, "--modules") == 0)
            o->modules_dir = v;
        else if (strcmp(a, "--data-dir") == 0)
            o->data_dir = v;
        else if (strcmp(a, "--reward-config") == 0)
            o->reward_config_path = v;
        else if (strcmp(a, "--feedback-config") == 0)
            o->feedback_config_path = v;
        else if (strcmp(a, "--templates") == 0)
            o->templates_dir = v;
        else if (strcmp(a, "--max-action-bytes") == 0)
            rc = parse_long(a, v, 1, 64L << 20, &n), o->max_action_bytes = (size_t)n;
        else if (strcmp(a, "--max-episodes") == 0)
            rc = parse_long(a, v, 1, 1000000, &n), o->max_episodes = (int)n;
        else if (strcmp(a, "--episode-idle-s") == 0)
            rc = parse_long(a, v, 1, 86400 * 30, &n), o->episode_idle_s = (double)n;
        else if (strcmp(a, "--max-turns") == 0)
            rc = parse_long(a, v, 1, 1000, &n), o->max_turns_limit = (int)n;
        else if (strcmp(a, "--compile-workers") == 0)
            rc = parse_long(a, v, 0, 1024, &n), o->compile_workers = (int)n;
        else if (strcmp(a, "--queue-limit") == 0)
            rc = parse_long(a, v, 1, 1000000, &n), o->queue_limit = (int)n;
        else if (strcmp(a, "--gpus") == 0)
            rc = parse_gpus(v, o);
        else if (strcmp(a, "--jobs-per-gpu") == 0)
            rc = parse_long(a, v, 1, 64, &n), o->jobs_per_gpu = (int)n;
        else if (strcmp(a, "--gpu-mem-mb") == 0)
            rc = parse_long(a, v, -1, 1L << 30, &n), o->gpu_mem_mb = n;
        else if (strcmp(a, "--worker-bind") == 0) {
            if (o->n_worker_binds >= PK_MAX_BINDS - 1) {
                fprintf(stderr, "pkgym serve: at most %d --worker-bind\n", PK_MAX_BINDS - 1);
                return -1;
            }
            o->worker_binds[o->n_worker_binds++] = v;
        } else if (strcmp(a, "--worker-heartbeat-ms") == 0)
            rc = parse_long(a, v, 10, 600000, &n), o->worker_heartbeat_ms = (int)n;
        else if (strcmp(a, "--worker-liveness") == 0)
            rc = parse_long(a, v, 2, 1000, &n), o->worker_liveness = (int)n;
        else if (strcmp(a, "--worker-wait-s") == 0)
            rc = parse_long(a, v, 1, 86400, &n), o->worker_wait_s = (double)n;
        else if (strcmp(a, "--shutdown-grace-ms") == 0)
            rc = parse_long(a, v, 0, 3600000, &n), o->shutdown_grace_ms = (int)n;
        else if (strcmp(a, "--baseline-max-cv") == 0)
            rc = parse_positive(a, v, &o->baseline_max_cv);
        else if (strcmp(a, "--baseline-max-age-s") == 0)
            rc = parse_positive(a, v, &o->baseline_max_age_s);
        else if (strcmp(a, "--max-client-episodes") == 0)
            rc = parse_long(a, v, 1, 1000000, &n), o->max_client_episodes = (int)n;
        else if (strcmp(a, "--max-client-steps") == 0)
            rc = parse_long(a, v, 1, 1000000, &n), o->max_client_steps = (int)n;
        else if (strcmp(a, "--episode-orphan-s") == 0)
            rc = parse_long(a, v, 1, 86400 * 30, &n), o->episode_orphan_s = (double)n;
        else if (strcmp(a, "--max-episode-bytes") == 0)
            rc = parse_long(a, v, 4096, LONG_MAX, &n), o->max_episode_bytes = (size_t)n;
        else if (strcmp(a, "--max-client-bytes") == 0)
            rc = parse_long(a, v, 4096, LONG_MAX, &n), o->max_client_bytes = (size_t)n;
        else if (strcmp(a, "--max-held-bytes") == 0)
            rc = parse_long(a, v, 4096, LONG_MAX, &n), o->max_held_bytes = (size_t)n;
        else if (strcmp(a, "--curve-secret-key") == 0)
            o->curve_secret_key = v;
        else if (strcmp(a, "--curve-allow") == 0)
            o->curve_allow = v;
        else if (strcmp(a, "--worker-curve-allow") == 0)
            o->worker_curve_allow = v;
        else if (strcmp(a, "--hook") == 0) {
            if (o->n_hook_args >= PK_MAX_HOOK_ARGS) {
                fprintf(stderr, "pkgym serve: at most %d --hook\n", PK_MAX_HOOK_ARGS);
                return -1;
            }
            o->hook_args[o->n_hook_args++] = v;
        } else {
            fprintf(stderr, "pkgym serve: unknown option %s (see --help)\n", a);
            return -1;
        }
        if (rc)
            return -1;
    }
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
    int pa = parse_args(argc, argv, &o);
    if (pa) {
        usage(pa > 0 ? stdout : stderr);
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
