/* The op table and the request side of the serving loop (dispatch.h). */
#include "dispatch.h"

#include <string.h>

#include <zmq.h>

#include "ops.h"

static const struct {
    const char *name;
    void (*run)(pk_call *c);
} ops[] = {
    {"hello", pk_op_hello},
    {"list_problems", pk_op_list_problems},
    {"get_problem", pk_op_get_problem},
    {"reset", pk_op_reset},
    {"step", pk_op_step},
    {"close", pk_op_close},
    {"trajectory", pk_op_trajectory},
    {"stats", pk_op_stats},
};

static void run_op(pk_call *c) {
    for (size_t i = 0; i < sizeof ops / sizeof *ops; i++) {
        if (strcmp(ops[i].name, c->req->op) == 0) {
            ops[i].run(c);
            return;
        }
    }
    pk_call_error(c, PK_E_UNKNOWN_OP, "unknown op '%s'", c->req->op);
}

int pk_dispatch_next(pk_server *s, pk_via via) {
    pk_call call = {.s = s};
    zmq_msg_t body;
    zmq_msg_init(&body);
    pk_transport t = {s->router, s->front};
    int r = pk_transport_recv(&t, via, &call.env, &body);
    if (r < 0) {
        zmq_msg_close(&body);
        return -1;
    }
    s->n.requests++;
    pk_client_identity(&body, &call.env, call.client_id);
    if (r == 0) { /* the sender is here: attach it to its connection */
        pk_presence_update(s->presence, pk_now_ms());
        pk_client_entry *sender = pk_client_get(&s->clients, call.client_id);
        pk_presence_seen(s->presence, sender, call.env.via == PK_VIA_FRONT, call.env.conn,
                         pk_now_ms());
        pk_client_drop_if_unused(sender);
    }
    if (r == 1) {
        if (call.env.n > 0)
            pk_call_error(&call, PK_E_BAD_REQUEST,
                          "expected the envelope and then one frame holding a msgpack map");
        zmq_msg_close(&body);
        return 0;
    }
    pk_request req;
    pk_error err;
    pk_error_clear(&err);
    int rc = pk_request_decode(&req, zmq_msg_data(&body), zmq_msg_size(&body), s->max_request_bytes,
                               &err);
    call.req = &req;
    if (rc)
        pk_call_error(&call, PK_E_BAD_REQUEST, "%s", err.message);
    else
        run_op(&call);
    pk_request_free(&req);
    zmq_msg_close(&body);
    return 0;
}
