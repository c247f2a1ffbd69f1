/* The server's ZeroMQ context and sockets: the client sockets (the ROUTER for CURVE endpoints,
 * the ZMTP front for plain tcp:// and ipc://; their limits and presence, then their endpoints)
 * and the PULL socket where evaluations complete. */
#ifndef PK_ENV_SERVER_SOCKETS_H
#define PK_ENV_SERVER_SOCKETS_H

#include <stddef.h>

#include "pk_common.h"
#include "server_state.h"

/* Opens them; done gets the inproc endpoint of the completion socket, for the evaluator. */
int pk_server_open_sockets(pk_server *s, char *done, size_t done_cap, pk_error *err);

#endif
