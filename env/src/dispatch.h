/* The request side: one request taken off the client ROUTER, its sender noted, its frame
 * decoded (pk_protocol.h) and handed to its op through the op table. */
#ifndef PK_ENV_DISPATCH_H
#define PK_ENV_DISPATCH_H

#include "server_state.h"
#include "transport.h"

/* Handles the next request from the socket via (transport.h); returns -1 when that socket has
 * nothing more to read. */
int pk_dispatch_next(pk_server *s, pk_via via);

#endif
