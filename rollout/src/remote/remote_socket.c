/* Broker and worker socket options and security (pk_remote_socket.h). */
#include "pk_remote_socket.h"

#include <stdio.h>
#include <string.h>

#include <zmq.h>

#include "pk_broker.h"
#include "pk_wire.h"

int pk_remote_socket_setup(void *sock, pk_remote_role role, pk_error *err) {
    int zero = 0, one = 1, reconnect_ms = 200, reconnect_max_ms = 2000;
    int64_t maxmsg = PK_WIRE_MAX_FRAME;
    int rc = zmq_setsockopt(sock, ZMQ_LINGER, &zero, sizeof zero) ||
             /* The number of jobs in flight is bounded by the broker, not by the queues. */
             zmq_setsockopt(sock, ZMQ_SNDHWM, &zero, sizeof zero) ||
             zmq_setsockopt(sock, ZMQ_RCVHWM, &zero, sizeof zero) ||
             zmq_setsockopt(sock, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
    if (!rc && role == PK_REMOTE_BROKER)
        /* A job sent to a worker that has gone fails at once (EHOSTUNREACH) instead of being
         * dropped silently: the broker then counts the worker as lost. */
        rc = zmq_setsockopt(sock, ZMQ_ROUTER_MANDATORY, &one, sizeof one);
    if (!rc && role == PK_REMOTE_WORKER)
        rc =
            zmq_setsockopt(sock, ZMQ_RECONNECT_IVL, &reconnect_ms, sizeof reconnect_ms) ||
            zmq_setsockopt(sock, ZMQ_RECONNECT_IVL_MAX, &reconnect_max_ms, sizeof reconnect_max_ms);
    if (rc)
        return pk_error_set(err, PK_ERR_IO, "worker socket options: %s", zmq_strerror(zmq_errno()));
    return PK_OK;
}

int pk_remote_bind(void *router, void *plain_stream, const char *endpoint,
                   const pk_curve_server *curve, int insecure, char *resolved, size_t resolved_cap,
                   pk_error *err) {
    int rc = pk_socket_bind_secure(router, plain_stream, endpoint, curve, PK_BROKER_ZAP_DOMAIN,
                                   insecure, resolved, resolved_cap, NULL, err);
    if (rc) {
        char why[sizeof err->message];
        snprintf(why, sizeof why, "%s", err ? err->message : "");
        return pk_error_set(err, rc, "worker endpoint: %s", why);
    }
    return PK_OK;
}

int pk_remote_connect(void *dealer, const char *endpoint, const pk_curve_client_keys *keys,
                      pk_error *err) {
    return pk_socket_connect_secure(dealer, endpoint, keys, err);
}
