/* Handshake events of a socket through a ZeroMQ monitor (pk_handshake_watch.h). */
#include "pk_handshake_watch.h"

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include <zmq.h>

#define WATCHED                                                                                    \
    (ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH |                             \
     ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL)

int pk_handshake_watch_start(pk_handshake_watch *w, void *zctx, void *sock, pk_error *err) {
    /* A fresh address each time: a worker opens a socket per session, and an inproc name is
     * released only once its old monitor is gone. */
    static atomic_ulong serial;
    char addr[96];
    snprintf(addr, sizeof addr, "inproc://pk-handshakes-%p-%lu", sock,
             atomic_fetch_add(&serial, 1));
    memset(w, 0, sizeof *w);
    if (zmq_socket_monitor(sock, addr, WATCHED) != 0)
        return pk_error_set(err, PK_ERR_SYSTEM, "socket monitor: %s", zmq_strerror(zmq_errno()));
    w->sock = sock;
    int zero = 0;
    w->pair = zmq_socket(zctx, ZMQ_PAIR);
    if (!w->pair || zmq_setsockopt(w->pair, ZMQ_LINGER, &zero, sizeof zero) != 0 ||
        zmq_connect(w->pair, addr) != 0) {
        int rc = pk_error_set(err, PK_ERR_SYSTEM, "socket monitor: %s", zmq_strerror(zmq_errno()));
        pk_handshake_watch_stop(w);
        return rc;
    }
    return PK_OK;
}

int pk_handshake_watch_read(pk_handshake_watch *w, pk_handshake_event *ev) {
    for (;;) {
        if (!w->pair)
            return -1;
        zmq_msg_t head, addr;
        zmq_msg_init(&head);
        zmq_msg_init(&addr);
        int n = zmq_msg_recv(&head, w->pair, ZMQ_DONTWAIT);
        int more = n >= 0 && zmq_msg_more(&head);
        if (more)
            zmq_msg_recv(&addr, w->pair, 0); /* the endpoint: the listener's, so no news */
        uint16_t event = 0;
        uint32_t value = 0;
        if (n >= 6) {
            memcpy(&event, zmq_msg_data(&head), sizeof event);
            memcpy(&value, (char *)zmq_msg_data(&head) + 2, sizeof value);
        }
        zmq_msg_close(&head);
        zmq_msg_close(&addr);
        if (n < 0)
            return -1;
        if (n < 6)
            continue;
        ev->value = value;
        if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED)
            ev->kind = PK_HANDSHAKE_OK;
        else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
            ev->kind = PK_HANDSHAKE_REFUSED;
        else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL &&
                 value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH)
            ev->kind = PK_HANDSHAKE_MECHANISM;
        else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL &&
                 value == ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC)
            ev->kind = PK_HANDSHAKE_CRYPTOGRAPHIC;
        else
            ev->kind = PK_HANDSHAKE_FAILED;
        return 0;
    }
}

void pk_handshake_watch_stop(pk_handshake_watch *w) {
    if (w->sock)
        zmq_socket_monitor(w->sock, NULL, 0);
    if (w->pair)
        zmq_close(w->pair);
    memset(w, 0, sizeof *w);
}

const char *pk_handshake_describe(const pk_handshake_event *ev, char *buf, size_t cap) {
    switch (ev->kind) {
    case PK_HANDSHAKE_OK:
        snprintf(buf, cap, "handshake succeeded");
        break;
    case PK_HANDSHAKE_REFUSED:
        snprintf(buf, cap, "the ZAP handler refused its CURVE key (status %u)", ev->value);
        break;
    case PK_HANDSHAKE_MECHANISM:
        snprintf(buf, cap, "one end uses CURVE and the other does not");
        break;
    case PK_HANDSHAKE_CRYPTOGRAPHIC:
        snprintf(buf, cap, "its CURVE handshake did not decrypt (the wrong server public key)");
        break;
    default:
        snprintf(buf, cap, "the handshake did not complete (code %u)", ev->value);
        break;
    }
    return buf;
}
