/* The C client: one DEALER socket, requests tagged with integer ids, replies matched by id. */
#include "pk_client.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <zmq.h>

#define PK_CLIENT_MAX_DEPTH 64

struct pk_client {
    void *ctx;
    void *sock;
    uint64_t next_id;
};

int pk_client_connect(const char *endpoint, pk_client **out, pk_error *err) {
    *out = NULL;
    pk_client *c = calloc(1, sizeof *c);
    if (!c)
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    c->next_id = 1;
    c->ctx = zmq_ctx_new();
    c->sock = c->ctx ? zmq_socket(c->ctx, ZMQ_DEALER) : NULL;
    if (!c->sock) {
        pk_client_close(c);
        return pk_error_set(err, PK_ERR_SYSTEM, "zmq socket: %s", zmq_strerror(zmq_errno()));
    }
    int linger = 0;
    zmq_setsockopt(c->sock, ZMQ_LINGER, &linger, sizeof linger);
    if (zmq_connect(c->sock, endpoint) != 0) {
        int e = zmq_errno();
        pk_client_close(c);
        return pk_error_set(err, PK_ERR_INVALID, "connect %s: %s", endpoint, zmq_strerror(e));
    }
    *out = c;
    return PK_OK;
}

void pk_client_close(pk_client *c) {
    if (!c)
        return;
    if (c->sock)
        zmq_close(c->sock);
    if (c->ctx)
        zmq_ctx_term(c->ctx);
    free(c);
}

int pk_client_send(pk_client *c, json_t *request, uint64_t *id, pk_error *err) {
    if (!json_is_object(request))
        return pk_error_set(err, PK_ERR_INVALID, "request must be a JSON object");
    uint64_t my_id = c->next_id++;
    if (json_object_set_new(request, "id", json_integer((json_int_t)my_id)))
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    int rc = PK_OK;
    if (pk_msgpack_pack_json(&pk, request))
        rc = pk_error_set(err, PK_ERR_NOMEM, "cannot encode the request");
    /* Empty delimiter frame: the server then sees the same envelope as from a REQ socket. */
    else if (zmq_send(c->sock, "", 0, ZMQ_SNDMORE) < 0 ||
             zmq_send(c->sock, sb.data, sb.size, 0) < 0)
        rc = pk_error_set(err, PK_ERR_IO, "send: %s", zmq_strerror(zmq_errno()));
    msgpack_sbuffer_destroy(&sb);
    if (rc == PK_OK && id)
        *id = my_id;
    return rc;
}

/* Receives one multipart message and returns its last frame. */
static int recv_body(pk_client *c, int timeout_ms, zmq_msg_t *body, pk_error *err) {
    zmq_pollitem_t item = {c->sock, 0, ZMQ_POLLIN, 0};
    int n = zmq_poll(&item, 1, timeout_ms);
    if (n < 0)
        return pk_error_set(err, PK_ERR_IO, "poll: %s", zmq_strerror(zmq_errno()));
    if (n == 0)
        return pk_error_set(err, PK_ERR_TIMEOUT, "no reply within %d ms", timeout_ms);
    for (;;) {
        if (zmq_msg_recv(body, c->sock, 0) < 0)
            return pk_error_set(err, PK_ERR_IO, "recv: %s", zmq_strerror(zmq_errno()));
        if (!zmq_msg_more(body))
            return PK_OK;
    }
}

int pk_client_recv(pk_client *c, int timeout_ms, json_t **reply, pk_error *err) {
    *reply = NULL;
    zmq_msg_t body;
    zmq_msg_init(&body);
    int rc = recv_body(c, timeout_ms, &body, err);
    if (rc == PK_OK) {
        msgpack_unpacked u;
        msgpack_unpacked_init(&u);
        size_t off = 0;
        if (msgpack_unpack_next(&u, zmq_msg_data(&body), zmq_msg_size(&body), &off) !=
                MSGPACK_UNPACK_SUCCESS ||
            u.data.type != MSGPACK_OBJECT_MAP)
            rc = pk_error_set(err, PK_ERR_IO, "reply is not a msgpack map");
        else
            rc = pk_json_from_msgpack(&u.data, "reply", PK_CLIENT_MAX_DEPTH, reply, err);
        msgpack_unpacked_destroy(&u);
    }
    zmq_msg_close(&body);
    return rc;
}

int pk_client_call(pk_client *c, json_t *request, int timeout_ms, json_t **reply, pk_error *err) {
    *reply = NULL;
    uint64_t id;
    int rc = pk_client_send(c, request, &id, err);
    if (rc)
        return rc;
    double deadline = pk_now_ms() + timeout_ms;
    for (;;) {
        int left = (int)(deadline - pk_now_ms());
        if (left < 0)
            left = 0;
        json_t *r;
        rc = pk_client_recv(c, left, &r, err);
        if (rc)
            return rc;
        json_t *rid = json_object_get(r, "id");
        if (json_is_integer(rid) && (uint64_t)json_integer_value(rid) == id) {
            *reply = r;
            return PK_OK;
        }
        json_decref(r); /* the late reply of an abandoned call */
    }
}
