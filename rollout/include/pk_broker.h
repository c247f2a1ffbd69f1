/* pk_broker: hands evaluation jobs to remote workers (`pkgym worker`) instead of local GPUs,
 * with the same contract as pk_scheduler: submit from the server's thread, each job's
 * pk_completion delivered as one pointer frame on done_endpoint (docs/scale-out.md).
 *
 * Workers connect to the broker's ROUTER (`pkgym serve --worker-bind`), authenticated with
 * CURVE on tcp:// (opts.curve; a session is bound to the key that opened it). Reliability follows
 * the zguide's Paranoid Pirate pattern with heartbeats both ways: a worker silent for
 * heartbeat_ms x liveness is lost, its jobs go back to the queue once (to another worker); a
 * job lost twice completes with harness_rc set and a message naming both workers. A result
 * is accepted only from the worker session that holds the job, for its current attempt, so
 * no job completes twice and results of a worker counted as lost are discarded.
 *
 * Placement: a job of W GPUs goes to one worker whose largest NVLink domain has W GPUs, and
 * which announced the job's problem at the server's version; host problems to a worker with
 * a host slot; a GPU job of an episode stays on the GPU model of its earlier turns while a
 * worker of that model is connected; among those, the least loaded. Reference (baseline) times are
 * cached per problem, world size and worker hardware (GPU model, driver, NCCL) in cache_dir and
 * sent with each job, so all workers of one GPU model score against one baseline. */
#ifndef PK_BROKER_H
#define PK_BROKER_H

#include <jansson.h>

#include "pk_curve.h"
#include "pk_scheduler.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PK_BROKER_MAX_BINDS 8
/* The ZAP domain of the worker endpoints: its allow directory (`--worker-curve-allow`) holds
 * the worker keys, apart from the client keys of PK_CURVE_DOMAIN_CLIENTS. */
#define PK_BROKER_ZAP_DOMAIN "pkgym-workers"

typedef struct pk_broker pk_broker;

typedef struct pk_broker_opts {
    void *zmq_ctx;
    const char *done_endpoint; /* completions go here (the server binds a PULL) */
    const char *binds[PK_BROKER_MAX_BINDS];
    int n_binds;
    int heartbeat_ms;      /* 0: 1000 */
    int liveness;          /* 0: 5 */
    int queue_limit;       /* jobs accepted and not finished; 0: 1024 */
    double worker_wait_s;  /* a job waits this long for a worker able to run it; 0: 120 */
    const char *cache_dir; /* the shared baseline cache; NULL: none */
    int remeasure_baseline;
    /* Security of the tcp:// worker endpoints (docs/security.md): with curve, CURVE with the
     * server's key pair, admitting the keys allowed for PK_BROKER_ZAP_DOMAIN (the caller calls
     * pk_curve_server_allow); without, loopback addresses only unless insecure. */
    const pk_curve_server *curve;
    int insecure;
} pk_broker_opts;

typedef struct pk_broker_stats {
    int workers;    /* connected */
    int gpus;       /* GPU slots of the connected workers */
    int queued;     /* waiting for a worker */
    int dispatched; /* on workers */
    uint64_t submitted, completed;
    uint64_t requeued;      /* jobs given to another worker after a loss */
    uint64_t lost_twice;    /* jobs failed because two workers were lost under them */
    uint64_t no_worker;     /* jobs failed: no able worker within worker_wait_s */
    uint64_t stale_results; /* results discarded: unknown session, job or attempt */
    uint64_t workers_joined, workers_lost, workers_left;
    int curve;                  /* CURVE on the tcp:// worker endpoints */
    uint64_t workers_refused;   /* handshakes whose CURVE key the ZAP handler refused */
    uint64_t handshakes_failed; /* other failed handshakes: no CURVE, wrong server key, ... */
    uint64_t overloaded;
    uint64_t baseline_hits, baseline_stored;
    double dispatch_ms_max; /* longest dispatch round */
} pk_broker_stats;

int pk_broker_create(const pk_broker_opts *opts, pk_broker **out, pk_error *err);
/* As pk_scheduler_submit. PK_ERR_OVERLOADED when the queue is full. gpu_model (NULL or ""
 * for none): the GPU model of the episode's earlier turns; while a connected worker has that
 * model, the job waits for one of those, so that one episode's timings come from one model. */
int pk_broker_submit(pk_broker *b, const pk_problem *p, const char *source,
                     const pk_eval_opts *opts, const char *gpu_model, void *user, uint64_t *ticket,
                     pk_error *err);
/* A job that the worker answers at once without the harness (bench/scale-out): its
 * completion has harness_rc PK_ERR_UNSUPPORTED ("no-op"), never a verdict. */
int pk_broker_submit_noop(pk_broker *b, void *user, uint64_t *ticket, pk_error *err);
void pk_broker_get_stats(pk_broker *b, pk_broker_stats *out);
/* Connected workers and recent departures, for `stats`: [{name, state, gpus, ...}]. */
json_t *pk_broker_workers_json(pk_broker *b);
/* Stops accepting. Until grace_ms have passed, queued jobs still go to workers and results are
 * taken, as in pk_scheduler_shutdown; then every job queued or at a worker is cancelled (its
 * completion carries harness_rc PK_ERR_BUSY; a worker's late result is dropped). Returns once
 * the broker's thread is joined: at the deadline, or earlier when no job is left. */
void pk_broker_shutdown(pk_broker *b, int grace_ms);
void pk_broker_free(pk_broker *b);

#ifdef __cplusplus
}
#endif
#endif
