/* The episode table: a fixed array of hash chains keyed by the random episode id. */
#include "episodes.h"

#include "episode_examples.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

static size_t bucket_of(const char *id) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (const char *p = id; *p; p++)
        h = (h ^ (uint8_t)*p) * 1099511628211ull;
    return (size_t)(h % PK_EPISODE_BUCKETS);
}

pk_episode *pk_episode_find(pk_episode_table *t, const char *id) {
    for (pk_episode *e = t->bucket[bucket_of(id)]; e; e = e->next)
        if (strcmp(e->id, id) == 0)
            return e;
    return NULL;
}

void pk_episode_insert(pk_episode_table *t, pk_episode *e) {
    size_t b = bucket_of(e->id);
    e->next = t->bucket[b];
    t->bucket[b] = e;
    t->count++;
}

void pk_episode_remove(pk_episode_table *t, pk_episode *e) {
    for (pk_episode **p = &t->bucket[bucket_of(e->id)]; *p; p = &(*p)->next) {
        if (*p == e) {
            *p = e->next;
            e->next = NULL;
            t->count--;
            return;
        }
    }
}

static size_t len_of(const char *s) {
    return s ? strlen(s) + 1 : 0;
}

int pk_episode_add_turn(pk_episode *e, pk_turn *t) {
    pk_turn *grown = realloc(e->turns, (size_t)(e->n_turns + 1) * sizeof *grown);
    if (!grown)
        return PK_ERR_NOMEM;
    e->turns = grown;
    e->turns[e->n_turns++] = *t;
    e->turns_bytes += pk_turn_text_bytes(t);
    memset(t, 0, sizeof *t);
    return PK_OK;
}

void pk_episode_drop_last_turn(pk_episode *e) {
    pk_turn *t = &e->turns[--e->n_turns];
    e->turns_bytes -= pk_turn_text_bytes(t);
    pk_turn_free(t);
}

void pk_episode_trim_stored(pk_episode *e) {
    for (; e->n_trimmed < e->n_stored && e->n_trimmed < e->n_turns; e->n_trimmed++) {
        pk_turn *t = &e->turns[e->n_trimmed];
        e->turns_bytes -= pk_turn_text_bytes(t);
        free(t->prompt);
        free(t->action);
        free(t->result_json);
        t->prompt = t->action = t->result_json = NULL;
        e->turns_bytes += pk_turn_text_bytes(t);
    }
}

void pk_episode_recharge(pk_episode *e) {
    size_t held = len_of(e->prompt) + len_of(e->group) + e->turns_bytes;
    if (e->in_flight)
        held += e->in_flight->bytes;
    pk_client_charge_bytes(e->owner, (long long)held - (long long)e->bytes);
    e->bytes = held;
}

void pk_episode_set_owner(pk_episode *e, pk_client_entry *c) {
    if (e->owner == c)
        return;
    pk_client_entry *old = e->owner;
    pk_client_charge_bytes(old, -(long long)e->bytes);
    pk_client_charge_bytes(c, (long long)e->bytes);
    if (c)
        c->episodes++;
    e->owner = c;
    pk_client_release(old, 1, 0);
}

void pk_episode_free(pk_episode *e) {
    if (!e)
        return;
    pk_client_charge_bytes(e->owner, -(long long)e->bytes);
    for (int i = 0; i < e->n_turns; i++)
        pk_turn_free(&e->turns[i]);
    free(e->turns);
    free(e->returns);
    free(e->group);
    free(e->prompt);
    json_decref(e->settings);
    pk_summarizer_free(e->summarizer);
    pk_episode_examples_free(e->examples);
    pk_client_release(e->owner, 1, 0);
    free(e);
}

int pk_episode_new_id(char id[PK_EPISODE_ID_LEN + 1]) {
    uint8_t raw[PK_EPISODE_ID_LEN / 2];
    if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw)
        return -1;
    for (size_t i = 0; i < sizeof raw; i++)
        snprintf(id + 2 * i, 3, "%02x", raw[i]);
    return 0;
}
