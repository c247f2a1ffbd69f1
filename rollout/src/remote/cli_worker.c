/* `pkgym worker`: options, signals, and the worker's lifetime (docs/scale-out.md). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_worker.h"

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig) {
    (void)sig;
    stop_requested = 1;
}

static void usage(FILE *f) {
    fprintf(
        f,
        "usage: pkgym worker --connect ENDPOINT [options]\n\n"
        "Runs evaluation jobs for a `pkgym serve --worker-bind ENDPOINT` broker, on this\n"
        "host's GPUs (or its CPUs for host problems). Start one per node, or one per\n"
        "NVLink domain, with mpirun or srun (docs/scale-out.md, scripts/scale-out).\n\n"
        "  --connect ENDPOINT     the broker's worker endpoint, e.g. tcp://head:5600\n"
        "  --gpus LIST            GPU indices, 'none' or 'auto' (default auto: the GPUs the\n"
        "                         launcher made visible, else this worker's share by local\n"
        "                         rank, within one NVLink domain)\n"
        "  --compile-workers N    compile workers (default: this worker's share of cores - 1)\n"
        "  --max-jobs N           jobs taken at once (default 2 x (compile + run slots))\n"
        "  --problems DIR         problems root (default %s)\n"
        "  --modules DIR          compiled problem modules (default %s)\n"
        "  --data-dir DIR         compile and baseline caches (default $TMPDIR/pkgym-worker-UID)\n"
        "  --name NAME            name in the broker's stats (default host/rRANK or host/pPID)\n"
        "  --heartbeat-ms N       heartbeat interval (default 1000; same as the broker's)\n"
        "  --liveness N           silent heartbeats before the broker counts as lost "
        "(default 5)\n"
        "  --grace-ms N           on SIGTERM/SIGINT, time for jobs in flight (default 30000)\n"
        "  --describe             print the announcement (GPUs, NVLink domains, capacity,\n"
        "                         problems) as JSON and exit\n"
        "  --quiet                no log lines\n",
        PK_WORKER_DEFAULT_PROBLEMS_DIR, PK_WORKER_DEFAULT_MODULES_DIR);
}

static int parse_int(const char *opt, const char *v, long lo, long hi, int *out) {
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || *end || end == v || x < lo || x > hi) {
        fprintf(stderr, "pkgym worker: %s wants an integer in [%ld, %ld], got '%s'\n", opt, lo, hi,
                v);
        return -1;
    }
    *out = (int)x;
    return 0;
}

/* Returns 0, 1 for --help, -1 on a bad option. */
static int parse_args(int argc, char **argv, pk_worker_opts *o, int *describe) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
            return 1;
        if (strcmp(a, "--describe") == 0) {
            *describe = 1;
            continue;
        }
        if (strcmp(a, "--quiet") == 0) {
            o->quiet = 1;
            continue;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "pkgym worker: unknown option or missing value: %s\n", a);
            return -1;
        }
        const char *v = argv[++i];
        int rc = 0;
        if (strcmp(a, "--connect") == 0)
            o->connect = v;
        else if (strcmp(a, "--gpus") == 0)
            o->gpus = v;
        else if (strcmp(a, "--compile-workers") == 0)
            rc = parse_int(a, v, 1, 1024, &o->compile_workers);
        else if (strcmp(a, "--max-jobs") == 0)
            rc = parse_int(a, v, 1, 100000, &o->max_jobs);
        else if (strcmp(a, "--problems") == 0)
            o->problems_dir = v;
        else if (strcmp(a, "--modules") == 0)
            o->modules_dir = v;
        else if (strcmp(a, "--data-dir") == 0)
            o->data_dir = v;
        else if (strcmp(a, "--name") == 0)
            o->name = v;
        else if (strcmp(a, "--heartbeat-ms") == 0)
            rc = parse_int(a, v, 10, 600000, &o->heartbeat_ms);
        else if (strcmp(a, "--liveness") == 0)
            rc = parse_int(a, v, 2, 1000, &o->liveness);
        else if (strcmp(a, "--grace-ms") == 0)
            rc = parse_int(a, v, 0, 3600000, &o->grace_ms);
        else {
            fprintf(stderr, "pkgym worker: unknown option %s (see --help)\n", a);
            return -1;
        }
        if (rc)
            return -1;
    }
    if (!*describe && !o->connect) {
        fprintf(stderr, "pkgym worker: --connect ENDPOINT is required\n");
        return -1;
    }
    return 0;
}

int pk_cmd_worker(int argc, char **argv) {
    pk_worker_opts o;
    pk_worker_opts_default(&o);
    int describe = 0;
    int pa = parse_args(argc, argv, &o, &describe);
    if (pa) {
        usage(pa > 0 ? stdout : stderr);
        return pa > 0 ? 0 : 2;
    }
    pk_error err;
    pk_error_clear(&err);
    if (describe) {
        json_t *info = NULL;
        if (pk_worker_describe(&o, &info, &err)) {
            fprintf(stderr, "pkgym worker: %s\n", err.message);
            return 1;
        }
        json_dumpf(info, stdout, JSON_INDENT(2));
        printf("\n");
        json_decref(info);
        return 0;
    }
    /* The stop signals are blocked while the scheduler's threads start (they inherit the
     * mask), so only the event loop's thread sees them. */
    sigset_t stop_set;
    sigemptyset(&stop_set);
    sigaddset(&stop_set, SIGINT);
    sigaddset(&stop_set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_set, NULL);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    o.unblock_stop_signals = 1;
    int rc = pk_worker_run(&o, &stop_requested, &err);
    if (rc) {
        fprintf(stderr, "pkgym worker: %s\n", err.message);
        return 1;
    }
    return 0;
}
