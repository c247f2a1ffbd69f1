/* pk_turn: one turn of an episode, the one record of it everywhere: the server's episode and
 * its step in flight, the trajectory store (written and read back), the store writer's jobs,
 * `pkgym reward` and `pkgym export`, and the summarizer's view of earlier turns. It lives in
 * common/ because reward/ and summarizer_hooks/ both use it and neither depends on the other.
 */
#ifndef PK_TURN_H
#define PK_TURN_H

#include <stddef.h>

#include "pk_common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pk_turn {
    int turn; /* 1-based, as everywhere in pkgym (step replies, the store, eval, export) */
    pk_status status;
    double score;      /* the online score */
    char *prompt;      /* the exact prompt this turn's action answered; NULL: unknown */
    char *action;      /* the model's whole response */
    char *summary;     /* its summary or plan */
    char *code;        /* the code extracted from it */
    char *feedback;    /* what the model was told of the verdict */
    char *result_json; /* pk_eval_result JSON; NULL when there was no evaluation */
    double started_at, finished_at; /* seconds since the epoch */
} pk_turn;

/* Texts are owned by whoever holds the record, NULL when absent (a reader may leave out what it
 * did not load). Frees them and zeroes t. */
void pk_turn_free(pk_turn *t);
/* A deep copy of from into *to: PK_OK, or PK_ERR_NOMEM with *to zeroed (nothing leaks). */
int pk_turn_copy(pk_turn *to, const pk_turn *from);
/* What its texts take in memory, each with its terminating NUL. */
size_t pk_turn_text_bytes(const pk_turn *t);

#ifdef __cplusplus
}
#endif
#endif
