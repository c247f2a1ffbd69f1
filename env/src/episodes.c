/* The episode table: a fixed array of hash chains keyed by the random episode id. */
#include "episodes.h"

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

void pk_turn_record_free(pk_turn_record *r) {
    free(r->prompt);
    free(r->action);
    free(r->summary);
    free(r->code);
    free(r->feedback);
    free(r->result_json);
    memset(r, 0, sizeof *r);
}

void pk_episode_free(pk_episode *e) {
    if (!e)
        return;
    for (int i = 0; i < e->n_turns; i++)
        pk_turn_record_free(&e->turns[i]);
    free(e->turns);
    free(e->returns);
    free(e->group);
    free(e->prompt);
    json_decref(e->settings);
    pk_summarizer_free(e->summarizer);
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
