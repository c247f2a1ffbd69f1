/* Store-then-reply: a reply that changes an episode (reset, step) goes out only once the
 * trajectory store has committed what it reports, so `trajectory` never misses a turn a client
 * was told about. The jobs run on the store writer's thread; the serving loop takes their
 * commits back (pk_server_take_stored) and sends the replies they held. */
#ifndef PK_ENV_STORE_THEN_REPLY_H
#define PK_ENV_STORE_THEN_REPLY_H

#include <stddef.h>

#include <jansson.h>

#include "episodes.h"
#include "store_writer.h"
#include "server_state.h"
#include "transport.h"

/* Commits job on the store writer, then sends body (consumed) to env with the raw id (owned by
 * the call). new_episode: a reset's episode, inserted into the table only once stored; on a
 * store failure it is freed and the reply is `internal`. turn_episode: the episode whose turn the
 * job stores; it stays in memory, even when closed, until the job is committed, so `trajectory`
 * (memory first, then the store) never misses a turn. env NULL: nothing is sent (a store write
 * of the server's own, e.g. finishing a restored episode). */
void pk_server_store_then_reply(pk_server *s, pk_store_job *job, const pk_envelope *env,
                                char *id_raw, size_t id_len, json_t *body, pk_episode *new_episode,
                                pk_episode *turn_episode);
/* Takes one committed job back from the writer and sends its reply. Returns -1 when no
 * committed job is waiting. */
int pk_server_take_stored(pk_server *s);

/* Sends e's turns that a store error left out to the store again, unless a store job of e is
 * pending (the server retries every second, and at close). */
void pk_server_store_backlog(pk_server *s, pk_episode *e);

/* Frees e when it was closed and has neither a step in flight nor a turn being committed. */
void pk_server_release_if_closed(pk_server *s, pk_episode *e);

#endif
