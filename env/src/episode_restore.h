/* Server restart: the open episodes of the last run, rebuilt from the trajectory store and the
 * server journal, so that a trainer's next step continues them (docs/protocol.md, "Restart"). */
#ifndef PK_ENV_EPISODE_RESTORE_H
#define PK_ENV_EPISODE_RESTORE_H

#include "pk_common.h"

struct pk_server;

/* Restores into s->episodes every episode of this data dir that is unfinished, not closed,
 * and active within episode_idle_s (at most max_episodes, the most recent first). A step that
 * was being evaluated when the last run died is remembered: the episode's next step request
 * is answered `internal`, saying so. Problems no longer loaded, or settings that no longer
 * apply, leave that episode out (logged). */
int pk_episode_restore(struct pk_server *s, pk_error *err);

#endif
