/* Request framing on the client sockets: the ROUTER (CURVE endpoints, inproc://) and the ZMTP
 * front (plain tcp:// and ipc://, pk_zmtp_front.h) give the same shape: a request is
 * [peer id][envelope frames...][body]; its reply mirrors the envelope (the id, and the empty
 * delimiter a REQ client adds) and goes back through the socket the request came on. */
#ifndef PK_ENV_TRANSPORT_H
#define PK_ENV_TRANSPORT_H

#include <stddef.h>

#include <zmq.h>

#include "pk_zmtp_front.h"

#define PK_MAX_ENVELOPE 4
#define PK_MAX_ENVELOPE_FRAME 256 /* ZeroMQ routing ids are at most 255 bytes */

typedef enum pk_via { PK_VIA_ROUTER = 0, PK_VIA_FRONT = 1 } pk_via;

/* The client sockets of a server. */
typedef struct pk_transport {
    void *router;
    pk_zmtp_front *front;
} pk_transport;

typedef struct pk_envelope {
    pk_via via; /* the socket it came on, which its reply takes */
    int conn;   /* its connection: the ROUTER's file descriptor (ZMQ_SRCFD) or the front's slot;
                 * -1: unknown */
    int n;
    size_t len[PK_MAX_ENVELOPE];
    char frame[PK_MAX_ENVELOPE][PK_MAX_ENVELOPE_FRAME];
} pk_envelope;

/* Receives one whole message from the socket via: [peer id][empty delimiter, optional][body].
 * Returns 0 with a body, 1 when the message has an unusable envelope (any other frame before
 * the body: only the identity is kept and *body holds nothing), -1 when none is waiting. */
int pk_transport_recv(const pk_transport *t, pk_via via, pk_envelope *env, zmq_msg_t *body);
/* Sends without blocking through env->via; a reply to a peer that has gone is dropped (ROUTER
 * semantics). */
int pk_transport_send(const pk_transport *t, const pk_envelope *env, const void *data, size_t len);

/* Takes one pointer frame off an inproc PULL socket without waiting (the evaluator's
 * completions, the store writer's committed jobs). Returns -1 when none is waiting; *out is
 * NULL when the frame is not the size of a pointer. */
int pk_transport_recv_pointer(void *pull, void **out);

#endif
