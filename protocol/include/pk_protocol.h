/* pk_protocol: protocol v1 on the wire (docs/protocol.md), below env and rollout: decoding of
 * one request frame and typed access to its fields, the msgpack pre-check every frame gets
 * (client requests, and the broker's worker frames in pk_remote), and the error codes of
 * replies. Every decoding failure is PK_ERR_INVALID with a message naming the field; the
 * server replies bad_request with it. */
#ifndef PK_PROTOCOL_H
#define PK_PROTOCOL_H

#include <stddef.h>

#include <msgpack.h>

#include "pk_common.h"

/* msgpack-c's unpacker holds at most 32 open containers. */
#define PK_MAX_NESTING 32

typedef struct pk_request {
    msgpack_unpacked unpacked;
    int has_map;              /* the frame decoded to a map (id may then be echoed) */
    const msgpack_object *id; /* NULL when absent */
    char op[32];
} pk_request;

/* Error codes of replies (docs/protocol.md, "Requests and replies"). */
#define PK_E_BAD_REQUEST "bad_request"
#define PK_E_UNKNOWN_OP "unknown_op"
#define PK_E_UNKNOWN_PROBLEM "unknown_problem"
#define PK_E_UNKNOWN_EPISODE "unknown_episode"
#define PK_E_EPISODE_DONE "episode_done"
#define PK_E_BUSY "busy"
#define PK_E_OVERLOADED "overloaded"
#define PK_E_INTERNAL "internal"
#define PK_E_INFRA "infra_error"

/* Checks the structure of one msgpack value in data (see msgpack_check.c). */
int pk_msgpack_check(const void *data, size_t len, int max_depth, pk_error *err);

/* Decodes a frame of at most max_bytes. On failure r->has_map and r->id may still be set so the
 * error reply can echo the id. Call pk_request_free either way. */
int pk_request_decode(pk_request *r, const void *data, size_t len, size_t max_bytes, pk_error *err);
void pk_request_free(pk_request *r);

const msgpack_object *pk_request_field(const pk_request *r, const char *name);
/* A string field without NUL bytes, malloc'd into *out (NULL when absent and optional). */
int pk_request_str(const pk_request *r, const char *name, int required, size_t max_len, char **out,
                   pk_error *err);
/* An integer field; *present says whether it was given (nil counts as absent). */
int pk_request_int(const pk_request *r, const char *name, long long *out, int *present,
                   pk_error *err);
/* Packs the request's id (or nothing) as raw msgpack bytes, malloc'd. */
int pk_request_copy_id(const pk_request *r, char **out, size_t *len, pk_error *err);

#endif
