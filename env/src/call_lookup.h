/* What a request names, looked up for an op: its sender's accounting entry, the problem of its
 * `problem` field, the open episode of its `episode` field. Each replies with the error (and
 * returns NULL) when there is none. */
#ifndef PK_ENV_CALL_LOOKUP_H
#define PK_ENV_CALL_LOOKUP_H

#include "episodes.h"
#include "pk_problems.h"
#include "reply.h"

/* The sender's accounting entry, or NULL after replying `internal` (out of memory). */
pk_client_entry *pk_call_client(pk_call *c);
/* The problem named by the required `problem` field. */
const pk_problem *pk_call_problem(pk_call *c);
/* The open episode named by the required `episode` field. A client that names an episode whose
 * owner has left becomes its owner (within its limits). */
pk_episode *pk_call_episode(pk_call *c);

#endif
