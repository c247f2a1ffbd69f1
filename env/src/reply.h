/* Replies (docs/protocol.md, "Requests and replies"): a JSON body encoded as one msgpack map,
 * with the request's id, sent to the envelope it came from. The API every op answers with; it
 * calls no op. */
#ifndef PK_ENV_REPLY_H
#define PK_ENV_REPLY_H

#include <stddef.h>

#include <jansson.h>

#include "client_limits.h"
#include "pk_protocol.h"
#include "server_state.h"
#include "transport.h"

/* One request being answered: where the reply goes and the id to echo. */
typedef struct pk_call {
    pk_server *s;
    pk_envelope env;
    const pk_request *req;
    char client_id[PK_CLIENT_ID_MAX]; /* the sender (client_limits.h) */
} pk_call;

/* Sends body (a JSON object, consumed; "ok" is added unless it has one) to env, echoing the id
 * packed as raw msgpack bytes (id_raw NULL: none): a reply sent after its request was freed. */
void pk_server_reply(pk_server *s, const pk_envelope *env, const char *id_raw, size_t id_len,
                     json_t *body);
/* Replies to c with body (consumed). */
void pk_call_ok(pk_call *c, json_t *body);
/* Replies to c with an error (a PK_E_* code of pk_protocol.h) and its message. */
void pk_call_error(pk_call *c, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* {"ok": false, "error": {code, message}}. */
json_t *pk_error_body(const char *code, const char *message);

#endif
