/* Per-client accounting (client_limits.h). */
#include "client_limits.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "pk_common.h"
#include "pk_splitmix.h"

static size_t bucket_of(const char *id) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (const char *p = id; *p; p++)
        h = (h ^ (uint8_t)*p) * 1099511628211ull;
    return (size_t)(h % PK_CLIENT_BUCKETS);
}

/* A secret of this run: a peer is named by a keyed hash of its routing id, so that neither
 * stats nor an error shows a routing id (issue 27, finding 1: a client that learns the ids the
 * ROUTER hands out can claim the next one). */
static uint8_t peer_secret[32];
static int peer_secret_ready;

void pk_client_identity(zmq_msg_t *body, const pk_envelope *env, char out[PK_CLIENT_ID_MAX]) {
    const char *user = body ? zmq_msg_gets(body, "User-Id") : NULL;
    if (user && *user) {
        snprintf(out, PK_CLIENT_ID_MAX, "key:%.80s", user);
        return;
    }
    if (!peer_secret_ready) {
        /* getrandom fails only without the syscall (Linux < 3.17): the clock then, not secret
         * from a patient local observer but no routing id either. */
        if (getrandom(peer_secret, sizeof peer_secret, 0) != (ssize_t)sizeof peer_secret)
            for (size_t i = 0; i < sizeof peer_secret; i++)
                peer_secret[i] = (uint8_t)pk_splitmix64((uint64_t)(pk_now_ms() * 1e3) + i);
        peer_secret_ready = 1;
    }
    uint8_t digest[32];
    pk_sha256 h;
    pk_sha256_init(&h);
    pk_sha256_update(&h, peer_secret, sizeof peer_secret);
    if (env->n > 0)
        pk_sha256_update(&h, env->frame[0], env->len[0]);
    pk_sha256_final(&h, digest);
    int n = snprintf(out, PK_CLIENT_ID_MAX, "peer:");
    for (size_t i = 0; i < 16 && n + 3 < PK_CLIENT_ID_MAX; i++)
        n += snprintf(out + n, PK_CLIENT_ID_MAX - (size_t)n, "%02x", digest[i]);
}

pk_client_entry *pk_client_get(pk_client_table *t, const char *id) {
    size_t b = bucket_of(id);
    for (pk_client_entry *c = t->bucket[b]; c; c = c->next)
        if (strcmp(c->id, id) == 0)
            return c;
    pk_client_entry *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    snprintf(c->id, sizeof c->id, "%s", id);
    c->table = t;
    c->next = t->bucket[b];
    t->bucket[b] = c;
    t->count++;
    return c;
}

void pk_client_drop_if_unused(pk_client_entry *c) {
    if (!c || c->episodes > 0 || c->steps > 0 || c->conns > 0)
        return;
    pk_client_table *t = c->table;
    for (pk_client_entry **p = &t->bucket[bucket_of(c->id)]; *p; p = &(*p)->next) {
        if (*p == c) {
            *p = c->next;
            t->count--;
            free(c);
            return;
        }
    }
}

void pk_client_release(pk_client_entry *c, int episode, int step) {
    if (!c)
        return;
    c->episodes -= episode;
    c->steps -= step;
    pk_client_drop_if_unused(c);
}

void pk_client_charge_bytes(pk_client_entry *c, long long delta) {
    if (!c)
        return;
    c->bytes = (size_t)((long long)c->bytes + delta);
    c->table->bytes = (size_t)((long long)c->table->bytes + delta);
}

int pk_client_is_gone(const pk_client_entry *c) {
    return c && c->conns == 0 && c->gone_ms > 0;
}

void pk_client_short_id(const pk_client_entry *c, char *out, size_t cap) {
    size_t n = strlen(c->id);
    snprintf(out, cap, "%.17s%s", c->id, n > 17 ? "..." : "");
}
