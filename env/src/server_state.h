/* The server's state: what the loop, the replies and the ops share. Nothing here calls
 * anything; server.h starts and runs a server, reply.h answers its requests. */
#ifndef PK_ENV_SERVER_STATE_H
#define PK_ENV_SERVER_STATE_H

#include <signal.h>
#include <stdint.h>

#include <jansson.h>

#include "client_limits.h"
#include "client_presence.h"
#include "episodes.h"
#include "evaluator.h"
#include "pk_archive.h"
#include "pk_curve.h"
#include "pk_problems.h"
#include "pk_profile.h"
#include "pk_reward.h"
#include "pk_store.h"
#include "pk_summarizer.h"
#include "pk_zmtp_front.h"
#include "server_journal.h"
#include "server_opts.h"
#include "store_writer.h"

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
    void *router;         /* CURVE endpoints (routing ids from the ZAP handler) and inproc:// */
    pk_zmtp_front *front; /* plain tcp:// and ipc://: peers named by the server (finding 1) */
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
    pk_profile_budget profile_budget; /* opts.profile_per_minute, shared by every GPU slot */
    int profile_budget_ready;
    pk_server_counters n;
    double started_ms;
    double next_expiry_ms; /* when idle episodes are next expired */
    volatile sig_atomic_t *stop;
} pk_server;

#endif
