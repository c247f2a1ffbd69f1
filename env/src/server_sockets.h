/* The server's ZeroMQ context and sockets: the client ROUTER (its limits and presence monitor,
 * then its endpoints) and the PULL socket where evaluations complete. */
#ifndef PK_ENV_SERVER_SOCKETS_H
#define PK_ENV_SERVER_SOCKETS_H

#include <stddef.h>

#include "pk_common.h"
#include "server_state.h"

/* Opens them; done gets the inproc endpoint of the completion socket, for the evaluator. */
int pk_server_open_sockets(pk_server *s, char *done, size_t done_cap, pk_error *err);

#endif
