/* ROUTER framing (see transport.h). */
#include "transport.h"

#include <string.h>

int pk_transport_recv(void *router, pk_envelope *env, zmq_msg_t *body) {
    env->n = 0;
    int bad = 0;
    for (;;) {
        zmq_msg_t part;
        zmq_msg_init(&part);
        if (zmq_msg_recv(&part, router, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&part);
            return -1;
        }
        int more = zmq_msg_more(&part);
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

int pk_transport_send(void *router, const pk_envelope *env, const void *data, size_t len) {
    for (int i = 0; i < env->n; i++)
        if (zmq_send(router, env->frame[i], env->len[i], ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
            return -1;
    return zmq_send(router, data, len, ZMQ_DONTWAIT) < 0 ? -1 : 0;
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
