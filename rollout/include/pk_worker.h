/* pk_worker: a remote evaluation worker (`pkgym worker`, docs/scale-out.md). It connects a
 * DEALER socket to a broker (`pkgym serve --worker-bind`), announces its GPUs, NVLink domains,
 * capacity and problems, and runs whole jobs (compile, symbol checks, run) with its own
 * scheduler and sandbox. Heartbeats go both ways (the zguide's Paranoid Pirate pattern):
 * when the broker falls silent the worker reconnects as a new session and drops the results
 * of the old one, which the broker has given to other workers by then. With CURVE keys every
 * session (and every reconnect of ZeroMQ's within one) authenticates anew; a broker that
 * refuses the worker's key, or that uses another security mechanism, stops the worker with
 * an error saying so, since retrying cannot fix that. */
#ifndef PK_WORKER_H
#define PK_WORKER_H

#include <signal.h>

#include <jansson.h>

#include "pk_common.h"
#include "pk_curve.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pk_worker_opts {
    const char *connect; /* the broker's worker endpoint */
    /* CURVE: the server's public key and this worker's key pair; NULL: no CURVE (the broker's
     * endpoint is then loopback, ipc://, or bound with --insecure). */
    const pk_curve_client_keys *curve;
    void *zmq_ctx; /* NULL: the worker's own context (an in-process worker shares its
                      server's, to reach the broker over inproc://) */
    const char *problems_dir, *modules_dir;
    const char *data_dir; /* compile and baseline caches; NULL: $TMPDIR/pkgym-worker-<uid> */
    const char *gpus;     /* NULL or "auto", "none", or a list "0,1" (pk_launch_pick_gpus) */
    int compile_workers;  /* 0: the worker's share of the cores */
    int max_jobs;         /* jobs the broker may give it at once; 0: 2 x (compile + run slots) */
    const char *name;     /* NULL: <host>[/r<rank>] */
    int heartbeat_ms;     /* 0: 1000 */
    int liveness;         /* silent heartbeats before the broker counts as lost; 0: 5 */
    int reconnect_max_ms; /* backoff ceiling; 0: 32000 */
    int grace_ms;         /* on stop, jobs in flight may finish for this long */
    int quiet;            /* no log lines on stderr */
    int unblock_stop_signals; /* the caller blocked SIGINT/SIGTERM so that the worker's threads
                                 inherit the block; the event loop's thread unblocks them once
                                 those threads run (`pkgym worker`) */
} pk_worker_opts;

void pk_worker_opts_default(pk_worker_opts *o);

/* Runs until *stop is set; then drains (no new jobs, finishes those in flight for grace_ms)
 * and says bye. Returns non-zero when it cannot start (problems, scheduler), and when the
 * broker refuses its CURVE key or its security mechanism (err says which and what to do). */
int pk_worker_run(const pk_worker_opts *o, volatile sig_atomic_t *stop, pk_error *err);

/* The announcement this worker would send (GPUs, domains, capacity, problems), without
 * connecting: `pkgym worker --describe`. */
int pk_worker_describe(const pk_worker_opts *o, json_t **out, pk_error *err);

/* `pkgym worker` entry point. */
int pk_cmd_worker(int argc, char **argv);

#ifdef __cplusplus
}
#endif
#endif
