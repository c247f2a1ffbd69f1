/* Per-client accounting: open episodes, the bytes they hold and steps in flight of each client
 * identity (its CURVE public key when authenticated, else its ZeroMQ routing id), so that one
 * client cannot take every slot of the server, and whether it is still connected, so that what
 * a client left behind expires soon (docs/protocol.md, "Limits"; issue 27, findings 3, 4). */
#ifndef PK_ENV_CLIENT_LIMITS_H
#define PK_ENV_CLIENT_LIMITS_H

#include <stddef.h>

#include <zmq.h>

#include "transport.h"

/* "key:" + a CURVE key, or "peer:" + a keyed hash of the routing id */
#define PK_CLIENT_ID_MAX 520
#define PK_CLIENT_BUCKETS 1024

typedef struct pk_client_table pk_client_table;

/* The owner of restored episodes until a client claims them (client_presence.h). */
#define PK_CLIENT_RESTORED "restored:"

/* One identity. Alive while it holds an episode, a step or a connection; freed when all three
 * counts are 0. */
typedef struct pk_client_entry {
    char id[PK_CLIENT_ID_MAX];
    int episodes;
    int steps;
    int conns;      /* connections of it known to be open (client_presence.h) */
    double gone_ms; /* > 0: when its last known connection closed (pk_now_ms clock) */
    size_t bytes;   /* held in memory by its episodes */
    pk_client_table *table;
    struct pk_client_entry *next;
} pk_client_entry;

struct pk_client_table {
    pk_client_entry *bucket[PK_CLIENT_BUCKETS];
    size_t count;
    size_t bytes; /* held by every episode */
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
/* Adds delta (may be negative) to c's bytes and the table's. NULL is a no-op. */
void pk_client_charge_bytes(pk_client_entry *c, long long delta);
/* Whether c is known to have left: none of its connections is open, and one was seen to close
 * (or it is the owner of restored episodes). A client whose connections are unknown (no file
 * descriptor, e.g. inproc) is never taken as gone. */
int pk_client_is_gone(const pk_client_entry *c);
/* A short form of the identity for messages: "key:abcd1234..." or "peer:0a1b2c...". */
void pk_client_short_id(const pk_client_entry *c, char *out, size_t cap);

#endif
