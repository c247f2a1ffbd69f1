/* ROUTER socket framing: a request is [envelope frames...][body]; its reply mirrors the
 * envelope (identity, and the empty delimiter a REQ client adds). */
#ifndef PK_ENV_TRANSPORT_H
#define PK_ENV_TRANSPORT_H

#include <stddef.h>

#include <zmq.h>

#define PK_MAX_ENVELOPE 4
#define PK_MAX_ENVELOPE_FRAME 256 /* ZeroMQ routing ids are at most 255 bytes */

typedef struct pk_envelope {
    int n;
    size_t len[PK_MAX_ENVELOPE];
    char frame[PK_MAX_ENVELOPE][PK_MAX_ENVELOPE_FRAME];
} pk_envelope;

/* Receives one whole message: [routing id][empty delimiter, optional][body]. Returns 0 with a
 * body, 1 when the message has an unusable envelope (any other frame before the body: only the
 * identity is kept and *body holds nothing), -1 on a socket error. */
int pk_transport_recv(void *router, pk_envelope *env, zmq_msg_t *body);
/* Sends without blocking; a reply to a peer that has gone is dropped (ROUTER semantics). */
int pk_transport_send(void *router, const pk_envelope *env, const void *data, size_t len);

/* Takes one pointer frame off an inproc PULL socket without waiting (the evaluator's
 * completions, the store writer's committed jobs). Returns -1 when none is waiting; *out is
 * NULL when the frame is not the size of a pointer. */
int pk_transport_recv_pointer(void *pull, void **out);

#endif
