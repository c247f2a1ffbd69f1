/* The observation built from an episode's turns: its chat form (`messages`, docs/protocol.md)
 * and the next prompt. */
#ifndef PK_ENV_OBSERVATION_H
#define PK_ENV_OBSERVATION_H

#include <jansson.h>

#include "episodes.h"
#include "server_state.h"

/* The observation's `messages`: the conversation as chat messages (NULL: out of memory). */
json_t *pk_episode_messages_json(pk_episode *e);
/* The next prompt of e after its last turn (NULL: out of memory). */
char *pk_episode_next_prompt(pk_episode *e);
/* The messages of a new episode of p under the server's default feedback settings. */
json_t *pk_first_messages_json(const pk_server *s, const pk_problem *p);

#endif
