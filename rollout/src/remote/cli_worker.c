/* `pkgym worker`: options, signals, and the worker's lifetime (docs/scale-out.md). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_cli_args.h"
#include "pk_stop_signals.h"
#include "pk_worker.h"

static void usage(FILE *f) {
    fprintf(
        f,
        "usage: pkgym worker --connect ENDPOINT [options]\n\n"
        "Runs evaluation jobs for a `pkgym serve --worker-bind ENDPOINT` broker, on this\n"
        "host's GPUs (or its CPUs for host problems). Start one per node, or one per\n"
        "NVLink domain, with mpirun or srun (docs/scale-out.md, scripts/scale-out).\n\n"
        "  --connect ENDPOINT     the broker's worker endpoint, e.g. tcp://head:5600\n"
        "  --curve-server-key FILE  the server's public key (its .pub): CURVE to the broker\n"
        "                         (default $PKGYM_WORKER_CURVE_SERVER_KEY)\n"
        "  --curve-secret-key FILE  this worker's key pair (pkgym keygen; mode 0600), whose\n"
        "                         .pub is in the server's --worker-curve-allow directory\n"
        "                         (default $PKGYM_WORKER_CURVE_SECRET_KEY)\n"
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
    long x;
    if (pk_arg_long("worker", opt, v, lo, hi, &x))
        return -1;
    *out = (int)x;
    return 0;
}

typedef struct curve_files {
    const char *server_key, *secret_key;
} curve_files;

/* Returns 0, 1 for --help, -1 on a bad option. */
static int parse_args(int argc, char **argv, pk_worker_opts *o, int *describe, curve_files *cf) {
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
        else if (strcmp(a, "--curve-server-key") == 0)
            cf->server_key = v;
        else if (strcmp(a, "--curve-secret-key") == 0)
            cf->secret_key = v;
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
    int pa = parse_args(argc, argv, &o, &describe, &cf);
    if (pa) {
        usage(pa > 0 ? stdout : stderr);
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
