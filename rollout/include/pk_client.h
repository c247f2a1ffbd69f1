/* pk_client: a C client for the pkgym server (protocol v1, docs/protocol.md), and the wire
 * encoding both sides share: one msgpack map per frame, converted to and from jansson values. */
#ifndef PK_CLIENT_H
#define PK_CLIENT_H

#include <stdint.h>

#include <jansson.h>
#include <msgpack.h>

#include "pk_common.h"
#include "pk_curve.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pk_client pk_client;

/* Connects a DEALER socket to endpoint (any ZeroMQ endpoint). CURVE keys come from
 * PKGYM_CURVE_SERVER_KEY and PKGYM_CURVE_CLIENT_KEY when set (pk_curve_client_keys_from_env). */
int pk_client_connect(const char *endpoint, pk_client **out, pk_error *err);
/* The same with explicit CURVE keys (NULL: none, whatever the environment says). On tcp:// a
 * refused handshake (key not authorized, CURVE mismatch) ends the next recv or call with
 * PK_ERR_IO saying so. */
int pk_client_connect_curve(const char *endpoint, const pk_curve_client_keys *keys, pk_client **out,
                            pk_error *err);
void pk_client_close(pk_client *c);

/* Sends request (a JSON object; its "id" is replaced by a fresh integer) without waiting. */
int pk_client_send(pk_client *c, json_t *request, uint64_t *id, pk_error *err);
/* Receives the next reply of any request (pipelining); PK_ERR_TIMEOUT after timeout_ms. */
int pk_client_recv(pk_client *c, int timeout_ms, json_t **reply, pk_error *err);
/* send + wait for the reply carrying the same id (replies to earlier, abandoned calls are
 * dropped). A reply with ok=false is still PK_OK: the caller reads its "error". */
int pk_client_call(pk_client *c, json_t *request, int timeout_ms, json_t **reply, pk_error *err);

/* Wire encoding. Packs a JSON value (integers stay integers, reals stay floats). */
int pk_msgpack_pack_json(msgpack_packer *pk, const json_t *v);
/* Converts a msgpack value to JSON. Fails with PK_ERR_INVALID, naming the path (e.g.
 * "options.reward.gamma"), on binary or extension data, non-string map keys or depth >
 * max_depth. where: the name of o for messages (e.g. "options"). */
int pk_json_from_msgpack(const msgpack_object *o, const char *where, int max_depth, json_t **out,
                         pk_error *err);

#ifdef __cplusplus
}
#endif
#endif
