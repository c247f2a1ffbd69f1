/* The environment server: start-up, the serving loop and shutdown (server.c). */
#ifndef PK_ENV_SERVER_H
#define PK_ENV_SERVER_H

#include <signal.h>

#include "pk_common.h"
#include "server_state.h"

int pk_server_init(pk_server *s, const pk_server_opts *o, volatile sig_atomic_t *stop,
                   pk_error *err);
/* Serves until *stop is set, then shuts down gracefully. */
int pk_server_run(pk_server *s);
/* One round of the serving loop (requests, completions, store commits, idle expiry), waiting
 * at most timeout_ms for something to do. Returns how many of its sockets had something (0:
 * none), -1 when polling failed. pk_server_run repeats it;
 * the server-loop fuzzer (tests/env/fuzz) drives it directly. */
int pk_server_poll_once(pk_server *s, int timeout_ms);
void pk_server_free(pk_server *s);

#endif
