/* Which clients are still connected, on both client sockets: on the ROUTER (CURVE endpoints),
 * a ZeroMQ monitor reports each connection accepted and closed (by file descriptor) and each
 * request names the descriptor it came on (ZMQ_SRCFD); on the ZMTP front (plain tcp:// and
 * ipc://), the front reports each connection opened and closed by its slot, and each request
 * names its slot. So a client entry knows its open connections. A client that has left is then
 * known within one poll round, and what it left behind expires after --episode-orphan-s
 * instead of --episode-idle-s (issue 27, finding 3). A request without a connection leaves its
 * client "unknown" (never gone). */
#ifndef PK_ENV_CLIENT_PRESENCE_H
#define PK_ENV_CLIENT_PRESENCE_H

#include <zmq.h>

#include "client_limits.h"
#include "pk_common.h"
#include "pk_zmtp_front.h"

typedef struct pk_presence pk_presence;

/* Starts monitoring router and front (before they accept connections; front may be NULL). */
int pk_presence_start(void *zctx, void *router, pk_zmtp_front *front, pk_presence **out,
                      pk_error *err);
void pk_presence_stop(pk_presence *p);
/* Applies the connection events that arrived: a client whose last open connection closed is
 * marked gone at now_ms (and freed when it holds nothing else). */
void pk_presence_update(pk_presence *p, double now_ms);
/* c sent a request on connection conn (of the front when on_front, else the ROUTER's file
 * descriptor; -1: unknown): attaches c to it (its first request there), or refreshes it. Call
 * pk_presence_update before looking c up (an update may free an entry that holds nothing). */
void pk_presence_seen(pk_presence *p, pk_client_entry *c, int on_front, int conn, double now_ms);

#endif
