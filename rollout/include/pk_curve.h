/* pk_curve: authentication and encryption of pkgym's ZeroMQ endpoints (docs/security.md).
 *
 * - Key pairs in ZeroMQ's certificate format (`pkgym keygen`): BASE.key (public + secret, 0600)
 *   and BASE.pub (public).
 * - The ZAP handler: admits a CURVE client only when its public key is in an allow directory.
 * - pk_socket_bind_secure / pk_socket_connect_secure: the one place where a socket gets its
 *   security. Every server endpoint (clients, and any later one such as remote workers) binds
 *   through it, and every client connects through it.
 */
#ifndef PK_CURVE_H
#define PK_CURVE_H

#include <stddef.h>

#include "pk_common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PK_CURVE_KEY_LEN 40 /* a Z85-encoded 32-byte key */
/* The ZAP domain of the server's client endpoints. */
#define PK_CURVE_DOMAIN_CLIENTS "pkgym-clients"

typedef struct pk_curve_keypair {
    char public_key[PK_CURVE_KEY_LEN + 1];
    char secret_key[PK_CURVE_KEY_LEN + 1]; /* "" when only the public key is known */
} pk_curve_keypair;

/* 1 when this libzmq supports CURVE. */
int pk_curve_available(void);
int pk_curve_keypair_new(pk_curve_keypair *kp, pk_error *err);
/* Writes BASE.key (both keys, 0600) and BASE.pub (the public key); existing files are
 * overwritten only with force. */
int pk_curve_keypair_save(const pk_curve_keypair *kp, const char *base, int force, pk_error *err);
/* Reads a key file: ZeroMQ certificate lines `public-key = "..."` and `secret-key = "..."`, or
 * a file holding just a 40-character public key. need_secret: the secret key must be there,
 * and the file must not be readable by group or others. */
int pk_curve_key_load(const char *path, int need_secret, pk_curve_keypair *kp, pk_error *err);

/* Server side: the server's key pair and the ZAP handler (one per ZeroMQ context: it binds
 * inproc://zeromq.zap.01). */
typedef struct pk_curve_server pk_curve_server;
int pk_curve_server_start(void *zctx, const char *secret_key_file, pk_curve_server **out,
                          pk_error *err);
/* Admits, on sockets bound with domain, the public keys of the files in dir (every readable
 * file not starting with '.', in the formats of pk_curve_key_load). The directory is read
 * again when its modification time changes, so adding or removing a file takes effect at the
 * next connection. */
int pk_curve_server_allow(pk_curve_server *s, const char *domain, const char *dir, pk_error *err);
const char *pk_curve_server_public_key(const pk_curve_server *s);
/* Counts of handshakes admitted and refused so far: all, and those of one ZAP domain. */
void pk_curve_server_counts(const pk_curve_server *s, unsigned long *admitted,
                            unsigned long *refused);
void pk_curve_server_domain_counts(pk_curve_server *s, const char *domain, unsigned long *admitted,
                                   unsigned long *refused);
/* Stops the handler; call before zmq_ctx_term. NULL is a no-op. */
void pk_curve_server_stop(pk_curve_server *s);

/* 1 when a tcp:// endpoint's address is loopback only (127.0.0.0/8, ::1, localhost, lo). */
int pk_endpoint_is_loopback_tcp(const char *endpoint);
/* The same for every transport with addresses (tcp://, ws://, wss://); 0 for the others. */
int pk_endpoint_is_loopback(const char *endpoint);
/* 1 when endpoint's transport reaches other hosts or users (tcp, ws, wss, tipc, vmci): the
 * endpoints that pk_socket_bind_secure gives CURVE when there are keys. */
int pk_endpoint_uses_curve(const char *endpoint);

/* Binds sock to endpoint under the one rule of every transport (docs/security.md,
 * "Transports"):
 * - network transports (tcp, ws, wss, tipc, vmci) with curve: CURVE server; the ZAP handler
 *   admits the keys allowed for domain;
 * - the same without curve: only on a loopback address (tcp, ws, wss), unless insecure (then a
 *   warning on stderr); else PK_ERR_INVALID saying what to do;
 * - ipc:// and inproc://: no CURVE (ipc:// relies on the permissions of the socket's
 *   directory, inproc:// is this process);
 * - pgm, epgm, norm, udp (no request-reply sockets) and unknown transports: PK_ERR_INVALID.
 * plain_stream (may be NULL): a ZMQ_STREAM socket (pk_zmtp_front.h) for the endpoints without
 * CURVE, whose peers then cannot choose their routing ids (issue 27, finding 1): plain tcp://
 * and ipc:// are bound to it, inproc:// stays on sock, and plain ws://, wss://, tipc:// and
 * vmci:// (no STREAM transport) are refused with PK_ERR_INVALID naming the alternatives. NULL:
 * every endpoint on sock (the broker's worker endpoint).
 * resolved (may be NULL): the endpoint as bound, a tcp port `*` resolved. on_stream (may be
 * NULL): 1 when it was bound to plain_stream. */
int pk_socket_bind_secure(void *sock, void *plain_stream, const char *endpoint,
                          const pk_curve_server *curve, const char *domain, int insecure,
                          char *resolved, size_t resolved_cap, int *on_stream, pk_error *err);

/* A ROUTER socket whose generated routing ids (for peers that send none) start at a number no
 * client can know. Every ROUTER that clients or workers connect to is made here. */
void *pk_router_socket_new(void *zctx);

/* Client side: the server's public key and this client's key pair. */
typedef struct pk_curve_client_keys {
    char server_public[PK_CURVE_KEY_LEN + 1];
    pk_curve_keypair client;
} pk_curve_client_keys;

/* server_key_file: the server's BASE.pub (or .key); client_key_file: this client's BASE.key. */
int pk_curve_client_keys_load(const char *server_key_file, const char *client_key_file,
                              pk_curve_client_keys *keys, pk_error *err);
/* From PKGYM_CURVE_SERVER_KEY and PKGYM_CURVE_CLIENT_KEY (file paths): *have = 0 when neither
 * is set; one without the other is PK_ERR_INVALID. */
int pk_curve_client_keys_from_env(pk_curve_client_keys *keys, int *have, pk_error *err);
/* Connects sock to endpoint, as a CURVE client when keys is non-NULL; unknown transports and
 * those without request-reply sockets are PK_ERR_INVALID. */
int pk_socket_connect_secure(void *sock, const char *endpoint, const pk_curve_client_keys *keys,
                             pk_error *err);

#ifdef __cplusplus
}
#endif
#endif
