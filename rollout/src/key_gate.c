/* One holder per key (see pk_key_gate.h): a list of held keys under one mutex; few keys are
 * held at once (one per compile worker), so a list is enough. */
#include "pk_key_gate.h"

#include <stdlib.h>
#include <string.h>

struct pk_key_gate_entry {
    char *key;
    pk_key_gate_entry *next;
};

void pk_key_gate_init(pk_key_gate *g) {
    memset(g, 0, sizeof *g);
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->cv, NULL);
}

void pk_key_gate_destroy(pk_key_gate *g) {
    while (g->busy) {
        pk_key_gate_entry *e = g->busy;
        g->busy = e->next;
        free(e->key);
        free(e);
    }
    pthread_cond_destroy(&g->cv);
    pthread_mutex_destroy(&g->mu);
}

static pk_key_gate_entry **find(pk_key_gate *g, const char *key) {
    pk_key_gate_entry **p = &g->busy;
    while (*p && strcmp((*p)->key, key) != 0)
        p = &(*p)->next;
    return p;
}

int pk_key_gate_enter(pk_key_gate *g, const char *key) {
    pk_key_gate_entry *e = malloc(sizeof *e);
    char *copy = strdup(key);
    if (!e || !copy) {
        free(e);
        free(copy);
        return PK_ERR_NOMEM;
    }
    pthread_mutex_lock(&g->mu);
    if (*find(g, key))
        g->waits++;
    while (*find(g, key))
        pthread_cond_wait(&g->cv, &g->mu);
    e->key = copy;
    e->next = g->busy;
    g->busy = e;
    pthread_mutex_unlock(&g->mu);
    return PK_OK;
}

void pk_key_gate_leave(pk_key_gate *g, const char *key) {
    pthread_mutex_lock(&g->mu);
    pk_key_gate_entry **p = find(g, key);
    pk_key_gate_entry *e = *p;
    if (e) {
        *p = e->next;
        free(e->key);
        free(e);
    }
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}
