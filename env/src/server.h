/* The environment server's internals: options, state, and the per-op handlers. */
#ifndef PK_ENV_SERVER_H
#define PK_ENV_SERVER_H

#include <signal.h>
#include <stdint.h>

#include <jansson.h>

#include "client_limits.h"
#include "client_presence.h"
#include "episodes.h"
#include "evaluator.h"
#include "pk_archive.h"
#include "pk_common.h"
#include "pk_curve.h"
#include "pk_problems.h"
#include "pk_reward.h"
#include "pk_scheduler.h"
#include "pk_store.h"
#include "pk_env_protocol.h"
#include "server_journal.h"
#include "store_writer.h"
#include "transport.h"

#define PK_MAX_BINDS 8
#define PK_MAX_HOOK_ARGS 32
#define PK_MAX_SUMMARY_BYTES (64u << 10) /* a step's `summary` field */

typedef struct pk_server_opts {
    const char *binds[PK_MAX_BINDS];
    int n_binds;
    const char *problems_dir;
    const char *modules_dir;
    const char *data_dir;
    const char *templates_dir;
    const char *reward_config_path;   /* NULL: defaults */
    const char *feedback_config_path; /* NULL: defaults */
    size_t max_action_bytes;
    int max_episodes;
    double episode_idle_s;
    int max_turns_limit;
    int compile_workers;
    int queue_limit;
    int n_gpus; /* -1: every GPU NVML reports */
    int gpus[PK_SCHED_MAX_GPUS];
    int jobs_per_gpu; /* 0: the scheduler's default */
    long gpu_mem_mb;  /* 0: from the free memory at start; -1: not counted */
    int shutdown_grace_ms;
    int remeasure_baseline;    /* time the reference on every step (no baseline cache reads) */
    double baseline_max_cv;    /* cached baselines noisier than this are measured again */
    double baseline_max_age_s; /* ... and older ones */
    /* Remote workers (docs/scale-out.md): with worker binds the server is a broker. */
    const char *worker_binds[PK_MAX_BINDS];
    int n_worker_binds;
    int worker_heartbeat_ms;                 /* 0: 1000 */
    int worker_liveness;                     /* 0: 5 */
    double worker_wait_s;                    /* 0: 120 */
    const char *hook_args[PK_MAX_HOOK_ARGS]; /* --hook NAME=plugin:/abs/x.so | NAME=cmd:/abs/p */
    int n_hook_args;
    const char *curve_secret_key;   /* --curve-secret-key: the key pair, clients' and workers' */
    const char *curve_allow;        /* --curve-allow: authorized client public keys */
    const char *worker_curve_allow; /* --worker-curve-allow: authorized worker public keys */
    int insecure;                   /* --insecure: non-loopback tcp:// without CURVE */
    int max_client_episodes;
    int max_client_steps;
    double episode_orphan_s;  /* a gone client's episodes expire this long after it left */
    size_t max_episode_bytes; /* what one episode may hold in memory */
    size_t max_client_bytes;  /* ... all episodes of one client */
    size_t max_held_bytes;    /* ... all episodes */
} pk_server_opts;

void pk_server_opts_default(pk_server_opts *o);

typedef struct pk_server_counters {
    uint64_t requests;
    uint64_t bad_requests;
    uint64_t steps_done;
    uint64_t steps_in_flight;
    uint64_t episodes_started;
    uint64_t episodes_expired;
    uint64_t episodes_orphaned; /* expired because their client had left (also in expired) */
    uint64_t store_errors;
    uint64_t steps_infra;       /* steps answered infra_error (no turn, no reward) */
    uint64_t episodes_restored; /* by the restart that started this run */
    double completion_ms_max;   /* the longest time one completion held the serving thread */
    double completion_ms_total;
    uint64_t completions;
    double request_ms_max;   /* the longest time one request held it */
    uint64_t archive_added;  /* new entries of the archive of verified kernels */
    uint64_t archive_errors; /* correct turns the archive could not take (logged) */
} pk_server_counters;

typedef struct pk_server {
    pk_server_opts opts;
    size_t max_request_bytes;
    void *zctx;
    void *router;
    void *done_pull;
    pk_problem_set *problems;
    pk_store_writer *writer; /* owns the trajectory store */
    pk_store *reader;        /* read-only connection, used only by the serving thread */
    pk_journal *journal;     /* steps in flight and closed episodes, for a restart */
    pk_archive *archive;     /* verified kernels (data_dir/archive.sqlite), serving thread only */
    void *stored_pull;       /* finished store jobs come back here */
    int resets_pending;      /* episodes waiting for their first store commit */
    pk_evaluator ev;         /* the local scheduler, or the broker and its workers */
    int sched_gpus; /* GPU slots of the local scheduler; -1: workers decide (broker mode) */
    pk_reward_config reward_default;
    json_t *feedback_default; /* object */
    pk_hook_registry *hooks;  /* the operator's: --hook and the feedback config's */
    pk_curve_server *curve;   /* NULL: no CURVE */
    pk_client_table clients;
    pk_presence *presence; /* which clients are still connected */
    json_t *gpus;          /* [{index, name, memory_mib}] */
    pk_episode_table episodes;
    pk_server_counters n;
    double started_ms;
    double next_expiry_ms; /* when idle episodes are next expired */
    volatile sig_atomic_t *stop;
} pk_server;

/* One request being answered: where the reply goes and the id to echo. */
typedef struct pk_call {
    pk_server *s;
    pk_envelope env;
    const pk_request *req;
    char client_id[PK_CLIENT_ID_MAX]; /* the sender (client_limits.h) */
} pk_call;

int pk_server_init(pk_server *s, const pk_server_opts *o, volatile sig_atomic_t *stop,
                   pk_error *err);
/* Serves until *stop is set, then shuts down gracefully. */
int pk_server_run(pk_server *s);
/* One round of the serving loop (requests, completions, store commits, idle expiry), waiting
 * at most timeout_ms for something to do. Returns how many of its sockets had something (0:
 * none), -1 when polling failed. pk_server_run repeats it;
 * the server-loop fuzzer (tests/env/fuzz) drives it directly. */
int pk_server_poll_once(pk_server *s, int timeout_ms);
void pk_server_free(pk_server *s);

/* Commits job on the store writer, then sends body (consumed) to env with the raw id (owned by
 * the call). new_episode: a reset's episode, inserted into the table only once stored; on a
 * store failure it is freed and the reply is `internal`. turn_episode: the episode whose turn the
 * job stores; it stays in memory, even when closed, until the job is committed, so `trajectory`
 * (memory first, then the store) never misses a turn. env NULL: nothing is sent (a store write
 * of the server's own, e.g. finishing a restored episode). */
void pk_server_store_then_reply(pk_server *s, pk_store_job *job, const pk_envelope *env,
                                char *id_raw, size_t id_len, json_t *body, pk_episode *new_episode,
                                pk_episode *turn_episode);
/* The store job of e's turns not stored yet (its newest turn and any earlier one a store error
 * left out) and of its returns when it has ended; NULL when out of memory or nothing is
 * unstored. */
pk_store_job *pk_episode_store_job(const pk_episode *e);
/* The next prompt of e after its last turn; the returns of an episode that ends. */
char *pk_episode_next_prompt(pk_episode *e);
void pk_episode_finish(pk_episode *e);

/* Sends e's turns that a store error left out to the store again, unless a store job of e is
 * pending (the server retries every second, and at close). */
void pk_server_store_backlog(pk_server *s, pk_episode *e);

/* Frees e when it was closed and has neither a step in flight nor a turn being committed. */
void pk_server_release_if_closed(pk_server *s, pk_episode *e);

/* Replies. body: a JSON object, consumed; "ok" is added. */
void pk_server_reply(pk_server *s, const pk_envelope *env, const char *id_raw, size_t id_len,
                     json_t *body);
void pk_call_ok(pk_call *c, json_t *body);
void pk_call_error(pk_call *c, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
json_t *pk_error_body(const char *code, const char *message);

/* Protocol error codes (docs/protocol.md). */
#define PK_E_BAD_REQUEST "bad_request"
#define PK_E_UNKNOWN_OP "unknown_op"
#define PK_E_UNKNOWN_PROBLEM "unknown_problem"
#define PK_E_UNKNOWN_EPISODE "unknown_episode"
#define PK_E_EPISODE_DONE "episode_done"
#define PK_E_BUSY "busy"
#define PK_E_OVERLOADED "overloaded"
#define PK_E_INTERNAL "internal"
#define PK_E_INFRA "infra_error"

/* Op handlers: each replies exactly once, now or (step) when its evaluation completes. */
void pk_op_hello(pk_call *c);
void pk_op_list_problems(pk_call *c);
void pk_op_get_problem(pk_call *c);
void pk_op_stats(pk_call *c);
void pk_op_reset(pk_call *c);
void pk_op_step(pk_call *c);
void pk_op_close(pk_call *c);
void pk_op_trajectory(pk_call *c);
/* A finished evaluation from the scheduler. */
void pk_server_on_completion(pk_server *s, pk_completion *done);

/* The sender's accounting entry, or NULL after replying `internal` (out of memory). */
pk_client_entry *pk_call_client(pk_call *c);

/* Finds the problem named by the required `problem` field, or replies with the error. */
const pk_problem *pk_call_problem(pk_call *c);

/* Finds the open episode named by the required `episode` field, or replies with the error. */
pk_episode *pk_call_episode(pk_call *c);
/* The episode's discounted returns, or null while it runs. */
json_t *pk_returns_json(const pk_episode *e);
/* The observation's `messages`: the conversation as chat messages (NULL: out of memory). */
json_t *pk_episode_messages_json(pk_episode *e);
/* The messages of a new episode of p under the server's default feedback settings. */
json_t *pk_first_messages_json(const pk_server *s, const pk_problem *p);

/* JSON helpers. */
json_t *pk_problem_detail_json(const pk_problem *p);
json_t *pk_problem_summary_json(const pk_problem *p);
json_t *pk_limits_json(const pk_server *s);
/* Lists the GPUs through NVML, loaded at run time (empty array when there is none). */
json_t *pk_gpu_list_json(void);

#endif
