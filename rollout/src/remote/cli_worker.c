/* `pkgym worker`: options, signals, and the worker's lifetime (docs/scale-out.md). */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_opts.h"
#include "pk_stop_signals.h"
#include "pk_worker.h"

typedef struct curve_files {
    const char *server_key, *secret_key;
} curve_files;

#define N_OPTS 15

static void options(pk_worker_opts *o, int *describe, curve_files *cf, pk_opt t[N_OPTS]) {
    const pk_opt rows[N_OPTS] = {
        {.type = PK_OPT_STR,
         .name = "--connect",
         .metavar = "ENDPOINT",
         .help = "the broker's worker endpoint, e.g. tcp://head:5600",
         .dest = &o->connect},
        {.type = PK_OPT_STR,
         .name = "--curve-server-key",
         .metavar = "FILE",
         .help = "the server's public key (its .pub): CURVE to the broker\n"
                 "(default $PKGYM_WORKER_CURVE_SERVER_KEY)",
         .dest = &cf->server_key},
        {.type = PK_OPT_STR,
         .name = "--curve-secret-key",
         .metavar = "FILE",
         .help = "this worker's key pair (pkgym keygen; mode 0600), whose\n"
                 ".pub is in the server's --worker-curve-allow directory\n"
                 "(default $PKGYM_WORKER_CURVE_SECRET_KEY)",
         .dest = &cf->secret_key},
        {.type = PK_OPT_STR,
         .name = "--gpus",
         .metavar = "LIST",
         .help = "GPU indices, 'none' or 'auto' (default auto: the GPUs the\n"
                 "launcher made visible, else this worker's share by local\n"
                 "rank, within one NVLink domain)",
         .dest = &o->gpus},
        {.type = PK_OPT_INT,
         .name = "--compile-workers",
         .metavar = "N",
         .help = "compile workers (default: this worker's share of cores - 1)",
         .dest = &o->compile_workers,
         .lo = 1,
         .hi = 1024},
        {.type = PK_OPT_INT,
         .name = "--max-jobs",
         .metavar = "N",
         .help = "jobs taken at once (default 2 x (compile + run slots))",
         .dest = &o->max_jobs,
         .lo = 1,
         .hi = 100000},
        {.type = PK_OPT_STR,
         .name = "--problems",
         .metavar = "DIR",
         .help = "problems root (default " PK_WORKER_DEFAULT_PROBLEMS_DIR ")",
         .dest = &o->problems_dir},
        {.type = PK_OPT_STR,
         .name = "--modules",
         .metavar = "DIR",
         .help = "compiled problem modules (default " PK_WORKER_DEFAULT_MODULES_DIR ")",
         .dest = &o->modules_dir},
        {.type = PK_OPT_STR,
         .name = "--data-dir",
         .metavar = "DIR",
         .help = "compile and baseline caches (default $TMPDIR/pkgym-worker-UID)",
         .dest = &o->data_dir},
        {.type = PK_OPT_STR,
         .name = "--name",
         .metavar = "NAME",
         .help = "name in the broker's stats (default host/rRANK or host/pPID)",
         .dest = &o->name},
        {.type = PK_OPT_INT,
         .name = "--heartbeat-ms",
         .metavar = "N",
         .help = "heartbeat interval (default 1000; same as the broker's)",
         .dest = &o->heartbeat_ms,
         .lo = 10,
         .hi = 600000},
        {.type = PK_OPT_INT,
         .name = "--liveness",
         .metavar = "N",
         .help = "silent heartbeats before the broker counts as lost (default 5)",
         .dest = &o->liveness,
         .lo = 2,
         .hi = 1000},
        {.type = PK_OPT_INT,
         .name = "--grace-ms",
         .metavar = "N",
         .help = "on SIGTERM/SIGINT, time for jobs in flight (default 30000)",
         .dest = &o->grace_ms,
         .lo = 0,
         .hi = 3600000},
        {.type = PK_OPT_FLAG,
         .name = "--describe",
         .help = "print the announcement (GPUs, NVLink domains, capacity,\n"
                 "problems) as JSON and exit",
         .dest = describe},
        {.type = PK_OPT_FLAG, .name = "--quiet", .help = "no log lines", .dest = &o->quiet},
    };
    memcpy(t, rows, sizeof rows);
}

static void usage(FILE *f, const pk_opt *t) {
    fprintf(f, "usage: pkgym worker --connect ENDPOINT [options]\n\n"
               "Runs evaluation jobs for a `pkgym serve --worker-bind ENDPOINT` broker, on this\n"
               "host's GPUs (or its CPUs for host problems). Start one per node, or one per\n"
               "NVLink domain, with mpirun or srun (docs/scale-out.md, scripts/scale-out).\n\n");
    pk_opts_help(f, t, N_OPTS);
}

/* Returns 0, 1 for --help, -1 on a bad option. */
static int parse_args(int argc, char **argv, const pk_opt *t, const pk_worker_opts *o,
                      const int *describe) {
    int pa = pk_opts_parse("worker", t, N_OPTS, argc, argv, 1, 0, NULL);
    if (pa != PK_OPTS_OK)
        return pa;
    if (!*describe && !o->connect) {
        fprintf(stderr, "pkgym worker: --connect ENDPOINT is required\n");
        return -1;
    }
    return 0;
}

/* The CURVE keys from the options, else from the environment (each file separately); both or
 * neither. */
static int load_curve(curve_files cf, pk_curve_client_keys *keys, int *have, pk_error *err) {
    const char *env_server = getenv("PKGYM_WORKER_CURVE_SERVER_KEY");
    const char *env_secret = getenv("PKGYM_WORKER_CURVE_SECRET_KEY");
    if (!cf.server_key && env_server && *env_server)
        cf.server_key = env_server;
    if (!cf.secret_key && env_secret && *env_secret)
        cf.secret_key = env_secret;
    *have = 0;
    if (!cf.server_key && !cf.secret_key)
        return PK_OK;
    if (!cf.server_key || !cf.secret_key)
        return pk_error_set(err, PK_ERR_INVALID,
                            "CURVE needs both the server's public key (--curve-server-key or "
                            "PKGYM_WORKER_CURVE_SERVER_KEY) and this worker's key pair "
                            "(--curve-secret-key or PKGYM_WORKER_CURVE_SECRET_KEY)");
    int rc = pk_curve_client_keys_load(cf.server_key, cf.secret_key, keys, err);
    *have = rc == PK_OK;
    return rc;
}

int pk_cmd_worker(int argc, char **argv) {
    pk_worker_opts o;
    pk_worker_opts_default(&o);
    int describe = 0;
    curve_files cf = {NULL, NULL};
    pk_opt t[N_OPTS];
    options(&o, &describe, &cf, t);
    int pa = parse_args(argc, argv, t, &o, &describe);
    if (pa) {
        if (pa > 0)
            usage(stdout, t);
        else
            fprintf(stderr, "usage: pkgym worker --connect ENDPOINT [options]  (--help: the "
                            "options)\n");
        return pa > 0 ? 0 : 2;
    }
    pk_error err;
    pk_error_clear(&err);
    pk_curve_client_keys keys;
    int have_keys = 0;
    if (!describe && load_curve(cf, &keys, &have_keys, &err)) {
        fprintf(stderr, "pkgym worker: %s\n", err.message);
        return 2;
    }
    o.curve = have_keys ? &keys : NULL;
    if (!describe && !have_keys && pk_endpoint_uses_curve(o.connect) &&
        !pk_endpoint_is_loopback(o.connect))
        fprintf(stderr,
                "pkgym worker: WARNING: %s without CURVE: the jobs and verdicts travel "
                "unauthenticated and unencrypted (give --curve-server-key and "
                "--curve-secret-key)\n",
                o.connect);
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
    volatile sig_atomic_t *stop_requested = pk_stop_signals_catch(NULL);
    o.unblock_stop_signals = 1;
    int rc = pk_worker_run(&o, stop_requested, &err);
    memset(&keys, 0, sizeof keys);
    if (rc) {
        fprintf(stderr, "pkgym worker: %s\n", err.message);
        return 1;
    }
    return 0;
}
