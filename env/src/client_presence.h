/* Which clients are still connected: a ZeroMQ monitor on the client socket reports each
 * connection accepted and closed (by file descriptor), and each request names the descriptor
 * it came on (ZMQ_SRCFD), so a client entry knows its open connections. A client that has
 * left is then known within one poll round, and what it left behind expires after
 * --episode-orphan-s instead of --episode-idle-s (issue 27, finding 3). Works for tcp://,
 * ipc:// and ws://; a request without a descriptor leaves its client "unknown" (never gone). */
#ifndef PK_ENV_CLIENT_PRESENCE_H
#define PK_ENV_CLIENT_PRESENCE_H

#include <zmq.h>

#include "client_limits.h"
#include "pk_common.h"

typedef struct pk_presence pk_presence;

/* Starts monitoring router (before it accepts connections). */
int pk_presence_start(void *zctx, void *router, pk_presence **out, pk_error *err);
void pk_presence_stop(pk_presence *p);
/* Applies the connection events that arrived: a client whose last open connection closed is
 * marked gone at now_ms (and freed when it holds nothing else). */
void pk_presence_update(pk_presence *p, double now_ms);
/* c sent msg: attaches c to msg's connection (its first request there), or refreshes it. Call
 * pk_presence_update before looking c up (an update may free an entry that holds nothing). */
void pk_presence_seen(pk_presence *p, pk_client_entry *c, zmq_msg_t *msg, double now_ms);

#endif
