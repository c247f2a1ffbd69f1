/* `pkgym export --verified`: the (task, plan, code, speedup) records of correct turns,
 * deduplicated by kernel hash per problem and written best first per problem. */
#ifndef PK_REWARD_EXPORT_VERIFIED_H
#define PK_REWARD_EXPORT_VERIFIED_H

#include <jansson.h>
#include <stdio.h>

#include "pk_common.h"

typedef struct pk_verified_set {
    json_t *lines; /* array of records, in store order */
} pk_verified_set;

/* Takes line (a record with problem_id, code, speedup), adding task, plan and kernel_hash. */
int pk_verified_set_add(pk_verified_set *v, json_t *line, pk_error *err);
/* Writes the records: problems by id, each best first (speedup, then store order); one record
 * per kernel hash and problem unless all_turns. *written and *duplicates count them. */
int pk_verified_set_write(pk_verified_set *v, FILE *out, int all_turns, long *written,
                          long *duplicates, pk_error *err);
void pk_verified_set_free(pk_verified_set *v);

#endif
