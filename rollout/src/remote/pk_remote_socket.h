/* The one place where the sockets between the broker and its workers are configured: limits,
 * queues, reconnect timing and (with issue #19) their security. Both ends call it before they
 * bind or connect, so a security mechanism added here (CURVE keys, a ZAP domain) applies to
 * every worker connection at once. Today the worker endpoint is NOT authenticated or
 * encrypted: bind it only on a trusted network (docs/scale-out.md, "Security"). */
#ifndef PK_REMOTE_SOCKET_H
#define PK_REMOTE_SOCKET_H

#include "pk_common.h"

typedef enum pk_remote_role {
    PK_REMOTE_BROKER, /* ROUTER, binds */
    PK_REMOTE_WORKER, /* DEALER, connects */
} pk_remote_role;

int pk_remote_socket_setup(void *sock, pk_remote_role role, pk_error *err);

#endif
