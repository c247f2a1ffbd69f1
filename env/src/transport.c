/* Request framing on the ROUTER and the ZMTP front (see transport.h). */
#include "transport.h"

#include <string.h>

/* The next frame of a whole message, as either socket gives it. */
static int next_part(const pk_transport *t, pk_via via, zmq_msg_t *part, int *more, int *conn) {
    if (via == PK_VIA_FRONT) {
        uint32_t slot;
        if (!t->front || pk_zmtp_front_recv(t->front, part, more, &slot) != 0)
            return -1;
        *conn = (int)slot;
        return 0;
    }
    if (!t->router || zmq_msg_recv(part, t->router, ZMQ_DONTWAIT) < 0)
        return -1;
    *more = zmq_msg_more(part);
    *conn = zmq_msg_get(part, ZMQ_SRCFD);
    return 0;
}

int pk_transport_recv(const pk_transport *t, pk_via via, pk_envelope *env, zmq_msg_t *body) {
    env->n = 0;
    env->via = via;
    env->conn = -1;
    int bad = 0;
    for (;;) {
        zmq_msg_t part;
        zmq_msg_init(&part);
        int more = 0;
        if (next_part(t, via, &part, &more, &env->conn) != 0) {
            zmq_msg_close(&part);
            return -1;
        }
        if (!more) {
            /* The envelope is the routing id, then at most the empty delimiter of a REQ
             * client (or a DEALER that adds it); anything more is an extra frame, whatever
             * its size (issue 27, finding 8). */
            if (env->n > 2 || (env->n == 2 && env->len[1] != 0)) {
                bad = 1;
                env->n = 1;
            }
            if (bad || env->n == 0) {
                zmq_msg_close(&part);
                return 1;
            }
            zmq_msg_move(body, &part);
            zmq_msg_close(&part);
            return 0;
        }
        size_t len = zmq_msg_size(&part);
        if (env->n < PK_MAX_ENVELOPE && len < PK_MAX_ENVELOPE_FRAME && !bad) {
            memcpy(env->frame[env->n], zmq_msg_data(&part), len);
            env->len[env->n++] = len;
        } else {
            bad = 1;
            env->n = env->n > 0 ? 1 : 0; /* keep only the identity to route the error */
        }
        zmq_msg_close(&part);
    }
}

int pk_transport_send(const pk_transport *t, const pk_envelope *env, const void *data, size_t len) {
    if (env->via == PK_VIA_FRONT) {
        if (!t->front || env->n < 1)
            return -1;
        const void *frames[PK_MAX_ENVELOPE];
        size_t lens[PK_MAX_ENVELOPE];
        int n = 0;
        for (int i = 1; i < env->n; i++, n++) {
            frames[n] = env->frame[i];
            lens[n] = env->len[i];
        }
        frames[n] = data;
        lens[n++] = len;
        /* A peer that has gone: dropped silently, as the ROUTER does. */
        return pk_zmtp_front_send(t->front, env->frame[0], env->len[0], frames, lens, n) < 0 ? -1
                                                                                             : 0;
    }
    if (!t->router)
        return -1;
    for (int i = 0; i < env->n; i++)
        if (zmq_send(t->router, env->frame[i], env->len[i], ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
            return -1;
    return zmq_send(t->router, data, len, ZMQ_DONTWAIT) < 0 ? -1 : 0;
}

int pk_transport_recv_pointer(void *pull, void **out) {
    zmq_msg_t m;
    zmq_msg_init(&m);
    *out = NULL;
    if (zmq_msg_recv(&m, pull, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&m);
        return -1;
    }
    if (zmq_msg_size(&m) == sizeof *out)
        memcpy(out, zmq_msg_data(&m), sizeof *out);
    zmq_msg_close(&m);
    return 0;
}
