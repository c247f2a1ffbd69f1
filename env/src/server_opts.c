/* The defaults of `pkgym serve` (its --help prints them). */
#include "server_opts.h"

#include <string.h>

#include "pk_env.h"
#include "pk_problems.h"

void pk_server_opts_default(pk_server_opts *o) {
    memset(o, 0, sizeof *o);
    o->problems_dir = pk_problems_default_dir();
    o->modules_dir = pk_problems_default_modules_dir();
    o->templates_dir = NULL; /* the summarizer's default (installed, or the source tree's) */
    o->data_dir = PK_DEFAULT_DATA_DIR;
    o->max_action_bytes = 1u << 20;
    o->max_episodes = 4096;
    o->episode_idle_s = 3600;
    o->max_turns_limit = 64;
    o->queue_limit = 1024;
    o->n_gpus = -1;
    o->shutdown_grace_ms = 10000;
    o->baseline_max_cv = 0.1;
    o->baseline_max_age_s = 86400;
    o->max_client_episodes = 1024;
    o->max_client_steps = 256;
    o->episode_orphan_s = 300;
    o->max_episode_bytes = (size_t)64 << 20;
    o->max_client_bytes = (size_t)1 << 30;
    o->max_held_bytes = (size_t)4 << 30;
    o->profile_per_minute = 0;
    o->profile_seconds = 120;
}
