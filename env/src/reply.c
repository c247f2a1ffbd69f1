/* Reply encoding: the body's JSON fields packed as one msgpack map, the id first. */
#include "reply.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <zmq.h>

#include "pk_client.h"

json_t *pk_error_body(const char *code, const char *message) {
    return json_pack("{s:b, s:{s:s, s:s}}", "ok", 0, "error", "code", code, "message", message);
}

static void send_encoded(pk_server *s, const pk_envelope *env, const msgpack_object *id,
                         const char *id_raw, size_t id_len, json_t *body) {
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    if (!body)
        body = pk_error_body(PK_E_INTERNAL, "out of memory building the reply");
    if (!json_object_get(body, "ok"))
        json_object_set_new(body, "ok", json_true());
    int has_id = id || id_raw;
    int bad = msgpack_pack_map(&pk, json_object_size(body) + (has_id ? 1 : 0));
    if (!bad && has_id) {
        bad = msgpack_pack_str(&pk, 2) || msgpack_pack_str_body(&pk, "id", 2);
        if (!bad)
            bad = id ? msgpack_pack_object(&pk, *id) : msgpack_sbuffer_write(&sb, id_raw, id_len);
    }
    const char *key;
    json_t *val;
    json_object_foreach(body, key, val) {
        size_t n = strlen(key);
        if (!bad)
            bad = msgpack_pack_str(&pk, n) || msgpack_pack_str_body(&pk, key, n) ||
                  pk_msgpack_pack_json(&pk, val);
    }
    pk_transport t = {s->router, s->front};
    if (!bad && pk_transport_send(&t, env, sb.data, sb.size) != 0)
        fprintf(stderr, "pkgym serve: send failed: %s\n", zmq_strerror(zmq_errno()));
    if (bad)
        fprintf(stderr, "pkgym serve: could not encode a reply\n");
    msgpack_sbuffer_destroy(&sb);
    json_decref(body);
}

void pk_server_reply(pk_server *s, const pk_envelope *env, const char *id_raw, size_t id_len,
                     json_t *body) {
    send_encoded(s, env, NULL, id_raw, id_len, body);
}

void pk_call_ok(pk_call *c, json_t *body) {
    send_encoded(c->s, &c->env, c->req ? c->req->id : NULL, NULL, 0, body);
}

void pk_call_error(pk_call *c, const char *code, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (strcmp(code, PK_E_BAD_REQUEST) == 0)
        c->s->n.bad_requests++;
    pk_call_ok(c, pk_error_body(code, msg));
}
