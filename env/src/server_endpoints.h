/* The client endpoints: CURVE (the server's key pair, the ZAP handler and who is allowed) and
 * every --bind through the one secure-bind function (pk_curve.h). */
#ifndef PK_ENV_SERVER_ENDPOINTS_H
#define PK_ENV_SERVER_ENDPOINTS_H

#include "pk_common.h"
#include "server_state.h"

/* Starts CURVE when configured, then binds every --bind: CURVE endpoints and inproc:// to
 * s->router, plain tcp:// and ipc:// to s->front. */
int pk_server_bind_endpoints(pk_server *s, pk_error *err);

#endif
