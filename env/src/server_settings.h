/* The operator's settings that every episode starts from: the reward and feedback defaults
 * (--reward-config, --feedback-config) and the registered hooks (--hook, and the feedback
 * config's "hook_registry"). */
#ifndef PK_ENV_SERVER_SETTINGS_H
#define PK_ENV_SERVER_SETTINGS_H

#include "pk_common.h"
#include "server_state.h"

/* Loads them into s->reward_default, s->feedback_default and s->hooks, and fails at start, not
 * at the first reset, when the feedback settings are wrong. */
int pk_server_settings_load(pk_server *s, pk_error *err);

#endif
