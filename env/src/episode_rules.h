/* The rules of an episode's end: when its last turn ends it (terminated or truncated, as the
 * step reply reports), and its discounted returns then. */
#ifndef PK_ENV_EPISODE_RULES_H
#define PK_ENV_EPISODE_RULES_H

#include <jansson.h>

#include "episodes.h"

/* Whether e's last turn ends it: *terminated when it was correct and the episode stops on
 * correct, else *truncated when it used the episode's max_turns. Either pointer may be NULL. */
int pk_episode_ended(const pk_episode *e, int *terminated, int *truncated);
/* Marks e done and computes its returns from its turns' scores (its reward config's mode and
 * gamma). */
void pk_episode_finish(pk_episode *e);
/* The episode's discounted returns, or null while it runs. */
json_t *pk_returns_json(const pk_episode *e);

#endif
