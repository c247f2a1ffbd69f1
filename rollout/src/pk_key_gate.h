/* pk_key_gate: lets one thread at a time work on a given key, so that jobs with the same
 * compile key compile once: the others wait, then find the object in the compile cache. */
#ifndef PK_KEY_GATE_H
#define PK_KEY_GATE_H

#include <pthread.h>

#include "pk_common.h"

typedef struct pk_key_gate_entry pk_key_gate_entry;

typedef struct pk_key_gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pk_key_gate_entry *busy; /* keys being worked on */
    unsigned long waits;     /* enters that had to wait for another holder */
} pk_key_gate;

void pk_key_gate_init(pk_key_gate *g);
void pk_key_gate_destroy(pk_key_gate *g);
/* Blocks while another thread holds key, then holds it. PK_ERR_NOMEM leaves it unheld. */
int pk_key_gate_enter(pk_key_gate *g, const char *key);
void pk_key_gate_leave(pk_key_gate *g, const char *key);

#endif
