/* The request side: one request taken off the client ROUTER, its sender noted, its frame
 * decoded (pk_protocol.h) and handed to its op through the op table. */
#ifndef PK_ENV_DISPATCH_H
#define PK_ENV_DISPATCH_H

#include "server_state.h"

/* Handles the next request; returns -1 when the socket has nothing more to read. */
int pk_dispatch_next(pk_server *s);

#endif
