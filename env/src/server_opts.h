/* `pkgym serve`'s settings (cli_serve.c parses them) and the limits the server keeps to. */
#ifndef PK_ENV_SERVER_OPTS_H
#define PK_ENV_SERVER_OPTS_H

#include <stddef.h>

#include "pk_scheduler.h"

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
    int jobs_per_gpu;    /* 0: the scheduler's default */
    int rank_visibility; /* PK_RANK_VISIBILITY_*; 0: $PKGYM_RANK_VISIBILITY, else all */
    long gpu_mem_mb;     /* 0: from the free memory at start; -1: not counted */
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
    /* The profile stage (docs/feedback.md, "Profiles"): profiles that may start per minute
     * (0: profiling off, the default) and the time limit of each. */
    int profile_per_minute;
    double profile_seconds;
} pk_server_opts;

void pk_server_opts_default(pk_server_opts *o);

#endif
