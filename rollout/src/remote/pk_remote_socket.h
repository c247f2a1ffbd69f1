/* The one place where the sockets between the broker and its workers are configured: limits,
 * queues, reconnect timing and their security (docs/security.md, docs/scale-out.md). Both ends
 * call pk_remote_socket_setup before they bind or connect; the broker binds every worker
 * endpoint through pk_remote_bind and a worker connects through pk_remote_connect, which go
 * through the secure-bind and secure-connect functions of the client endpoints (pk_curve.h)
 * with the workers' own ZAP domain (PK_BROKER_ZAP_DOMAIN), so a client key never admits a
 * worker and a worker key never admits a client. */
#ifndef PK_REMOTE_SOCKET_H
#define PK_REMOTE_SOCKET_H

#include <stddef.h>

#include "pk_common.h"
#include "pk_curve.h"

typedef enum pk_remote_role {
    PK_REMOTE_BROKER, /* ROUTER, binds */
    PK_REMOTE_WORKER, /* DEALER, connects */
} pk_remote_role;

int pk_remote_socket_setup(void *sock, pk_remote_role role, pk_error *err);

/* Broker: binds a worker endpoint.
 * - tcp:// with curve: a CURVE server with the server's key pair; the ZAP handler admits the
 *   keys allowed for PK_BROKER_ZAP_DOMAIN (pk_curve_server_allow, `--worker-curve-allow`);
 * - tcp:// without curve: a loopback address only, unless insecure (a warning on stderr);
 *   otherwise PK_ERR_INVALID saying which options to give;
 * - ipc:// and inproc:// (the server's in-process worker): no CURVE.
 * plain_stream (may be NULL): the socket of a pk_zmtp_front for the plain endpoints (tcp://,
 * ipc://; other plain transports refused), whose peers cannot choose their routing ids (issue
 * 27, finding 1); inproc:// and CURVE endpoints stay on router (pk_socket_bind_secure).
 * resolved (may be NULL): the endpoint as bound. */
int pk_remote_bind(void *router, void *plain_stream, const char *endpoint,
                   const pk_curve_server *curve, int insecure, char *resolved, size_t resolved_cap,
                   pk_error *err);

/* Worker: connects to the broker, as a CURVE client when keys is non-NULL. */
int pk_remote_connect(void *dealer, const char *endpoint, const pk_curve_client_keys *keys,
                      pk_error *err);

#endif
