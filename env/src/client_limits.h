/* Per-client accounting: open episodes and steps in flight of each client identity (its CURVE
 * public key when authenticated, else its ZeroMQ routing id), so that one client cannot take
 * every slot of the server (docs/protocol.md, "Limits"). */
#ifndef PK_ENV_CLIENT_LIMITS_H
#define PK_ENV_CLIENT_LIMITS_H

#include <stddef.h>

#include <zmq.h>

#include "transport.h"

/* "key:" + a CURVE key, or "peer:" + a keyed hash of the routing id */
#define PK_CLIENT_ID_MAX 520
#define PK_CLIENT_BUCKETS 1024

typedef struct pk_client_table pk_client_table;

/* One identity. Alive while it holds an episode or a step; freed when both counts are 0. */
typedef struct pk_client_entry {
    char id[PK_CLIENT_ID_MAX];
    int episodes;
    int steps;
    pk_client_table *table;
    struct pk_client_entry *next;
} pk_client_entry;

struct pk_client_table {
    pk_client_entry *bucket[PK_CLIENT_BUCKETS];
    size_t count;
};

/* The identity of the sender of body: "key:<Z85>" when CURVE authenticated it (the ZAP
 * handler's User-Id), else "peer:<hex routing id>" from the envelope. */
void pk_client_identity(zmq_msg_t *body, const pk_envelope *env, char out[PK_CLIENT_ID_MAX]);
/* The entry of id, created with zero counts when absent; NULL when out of memory. */
pk_client_entry *pk_client_get(pk_client_table *t, const char *id);
/* Decrements a count (pass 1 for what ends) and frees the entry when both reach 0. NULL is a
 * no-op. */
void pk_client_release(pk_client_entry *c, int episode, int step);
/* Frees an entry that got no count (a refused request). */
void pk_client_drop_if_unused(pk_client_entry *c);
/* A short form of the identity for messages: "key:abcd1234..." or "peer:0a1b2c...". */
void pk_client_short_id(const pk_client_entry *c, char *out, size_t cap);

#endif
