/* The server's context and sockets (server_sockets.h). */
#include "server_sockets.h"

#include <stdio.h>

#include <zmq.h>

#include "pk_curve.h"
#include "server_endpoints.h"

int pk_server_open_sockets(pk_server *s, char *done, size_t done_cap, pk_error *err) {
    s->zctx = zmq_ctx_new();
    if (!s->zctx)
        return pk_error_set(err, PK_ERR_SYSTEM, "zmq_ctx_new: %s", zmq_strerror(zmq_errno()));
    s->router = pk_router_socket_new(s->zctx);
    s->done_pull = zmq_socket(s->zctx, ZMQ_PULL);
    if (!s->router || !s->done_pull)
        return pk_error_set(err, PK_ERR_SYSTEM, "zmq_socket: %s", zmq_strerror(zmq_errno()));
    /* Frames far beyond the request limit are dropped before they are buffered (the front: as
     * soon as a frame's header announces them); those up to 4x the limit still get a clear
     * bad_request. */
    int64_t maxmsg = (int64_t)s->max_request_bytes * 4;
    int frc = pk_zmtp_front_new(s->zctx, (size_t)maxmsg, &s->front, err);
    if (frc)
        return frc;
    /* Before any connection: every one is seen from its start. */
    int prc = pk_presence_start(s->zctx, s->router, s->front, &s->presence, err);
    if (prc)
        return prc;
    int hwm = 100000, linger = 1000, unlimited = 0;
    if (zmq_setsockopt(s->router, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg) ||
        zmq_setsockopt(s->router, ZMQ_SNDHWM, &hwm, sizeof hwm) ||
        zmq_setsockopt(s->router, ZMQ_RCVHWM, &hwm, sizeof hwm) ||
        zmq_setsockopt(s->router, ZMQ_LINGER, &linger, sizeof linger) ||
        zmq_setsockopt(s->done_pull, ZMQ_RCVHWM, &unlimited, sizeof unlimited))
        return pk_error_set(err, PK_ERR_SYSTEM, "zmq_setsockopt: %s", zmq_strerror(zmq_errno()));
    snprintf(done, done_cap, "inproc://pkgym-done-%p", (void *)s);
    if (zmq_bind(s->done_pull, done) != 0)
        return pk_error_set(err, PK_ERR_SYSTEM, "bind %s: %s", done, zmq_strerror(zmq_errno()));
    return pk_server_bind_endpoints(s, err);
}
