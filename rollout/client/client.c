/* The C client: one DEALER socket, requests tagged with integer ids, replies matched by id. */
#include "pk_client.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zmq.h>

#define PK_CLIENT_MAX_DEPTH 64

#define HANDSHAKE_FAILED                                                                           \
    (ZMQ_EVENT_HANDSHAKE_FAILED_AUTH | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |                       \
     ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL)

struct pk_client {
    void *ctx;
    void *sock;
    void *monitor; /* tcp:// only: failed handshakes, reported instead of a silent timeout */
    int curve;
    char endpoint[256];
    uint64_t next_id;
};

static int watch_handshakes(pk_client *c, pk_error *err) {
    char addr[64];
    snprintf(addr, sizeof addr, "inproc://pk-client-monitor-%p", (void *)c);
    if (zmq_socket_monitor(c->sock, addr, HANDSHAKE_FAILED) != 0 ||
        !(c->monitor = zmq_socket(c->ctx, ZMQ_PAIR)) || zmq_connect(c->monitor, addr) != 0)
        return pk_error_set(err, PK_ERR_SYSTEM, "socket monitor: %s", zmq_strerror(zmq_errno()));
    int linger = 0;
    zmq_setsockopt(c->monitor, ZMQ_LINGER, &linger, sizeof linger);
    return PK_OK;
}

/* Reads one monitor event: PK_OK when it is not a failure worth reporting. */
static int handshake_error(pk_client *c, pk_error *err) {
    zmq_msg_t ev, ep;
    zmq_msg_init(&ev);
    zmq_msg_init(&ep);
    int got = zmq_msg_recv(&ev, c->monitor, ZMQ_DONTWAIT) >= 6 &&
              zmq_msg_recv(&ep, c->monitor, ZMQ_DONTWAIT) >= 0;
    uint16_t event = 0;
    uint32_t value = 0;
    if (got) {
        memcpy(&event, zmq_msg_data(&ev), 2);
        memcpy(&value, (char *)zmq_msg_data(&ev) + 2, 4);
    }
    zmq_msg_close(&ev);
    zmq_msg_close(&ep);
    if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
        return pk_error_set(err, PK_ERR_IO,
                            "%s refused this client's CURVE key (ZAP status %u): the operator must "
                            "add its .pub to the server's --curve-allow directory",
                            c->endpoint, value);
    if (event & HANDSHAKE_FAILED)
        return pk_error_set(err, PK_ERR_IO, "the handshake with %s failed: %s", c->endpoint,
                            c->curve ? "is the server key this server's, and does it use CURVE?"
                                     : "the server probably requires CURVE: set "
                                       "PKGYM_CURVE_SERVER_KEY and PKGYM_CURVE_CLIENT_KEY");
    return PK_OK;
}

int pk_client_connect(const char *endpoint, pk_client **out, pk_error *err) {
    *out = NULL;
    pk_curve_client_keys keys;
    int have = 0;
    int rc = pk_curve_client_keys_from_env(&keys, &have, err);
    if (rc)
        return rc;
    rc = pk_client_connect_curve(endpoint, have ? &keys : NULL, out, err);
    memset(&keys, 0, sizeof keys);
    return rc;
}

int pk_client_connect_curve(const char *endpoint, const pk_curve_client_keys *keys, pk_client **out,
                            pk_error *err) {
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
    snprintf(c->endpoint, sizeof c->endpoint, "%s", endpoint);
    c->curve = keys != NULL;
    int rc = pk_endpoint_uses_curve(endpoint) ? watch_handshakes(c, err) : PK_OK;
    if (rc == PK_OK)
        rc = pk_socket_connect_secure(c->sock, endpoint, keys, err);
    if (rc) {
        pk_client_close(c);
        return rc;
    }
    *out = c;
    return PK_OK;
}

void pk_client_close(pk_client *c) {
    if (!c)
        return;
    if (c->monitor) {
        zmq_socket_monitor(c->sock, NULL, 0);
        zmq_close(c->monitor);
    }
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
    double deadline = pk_now_ms() + timeout_ms;
    for (;;) {
        zmq_pollitem_t items[2] = {{c->sock, 0, ZMQ_POLLIN, 0}, {c->monitor, 0, ZMQ_POLLIN, 0}};
        int left = (int)(deadline - pk_now_ms());
        int n = zmq_poll(items, c->monitor ? 2 : 1, left > 0 ? left : 0);
        if (n < 0)
            return pk_error_set(err, PK_ERR_IO, "poll: %s", zmq_strerror(zmq_errno()));
        if (c->monitor && (items[1].revents & ZMQ_POLLIN)) {
            int rc = handshake_error(c, err);
            if (rc)
                return rc;
        }
        if (items[0].revents & ZMQ_POLLIN)
            break;
        if (pk_now_ms() >= deadline)
            return pk_error_set(err, PK_ERR_TIMEOUT, "no reply within %d ms", timeout_ms);
    }
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
