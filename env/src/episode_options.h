/* reset's `options`: per-episode reward, feedback and check settings over the server defaults. */
#ifndef PK_ENV_EPISODE_OPTIONS_H
#define PK_ENV_EPISODE_OPTIONS_H

#include <jansson.h>

#include "episodes.h"

/* Applies options (a JSON object or NULL) to e: e->reward from reward_default, e->summarizer
 * from feedback_default, e->eval (options.profile into e->eval.profile: refused unless
 * profiling_on, the server's --profile-per-minute), e->stop_on_correct, and e->settings (the
 * settings in effect).
 * Hooks are names registered in hooks (the operator's); a path is refused. PK_ERR_INVALID names
 * the offending key, e.g. "options.check.trials". */
int pk_episode_apply_options(pk_episode *e, const json_t *options,
                             const pk_reward_config *reward_default, const json_t *feedback_default,
                             const pk_hook_registry *hooks, const char *templates_dir,
                             int profiling_on, pk_error *err);

#endif
