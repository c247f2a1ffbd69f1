/* The op handlers (docs/protocol.md, "Ops"), called by the dispatcher (dispatch.c); each
 * replies exactly once through reply.h, now or (step) when its evaluation completes. */
#ifndef PK_ENV_OPS_H
#define PK_ENV_OPS_H

#include "pk_scheduler.h"
#include "reply.h"

/* ops_info.c: what the server offers. */
void pk_op_hello(pk_call *c);
void pk_op_list_problems(pk_call *c);
void pk_op_get_problem(pk_call *c);
void pk_op_stats(pk_call *c);
/* ops_episode.c: an episode's lifecycle. */
void pk_op_reset(pk_call *c);
void pk_op_close(pk_call *c);
void pk_op_trajectory(pk_call *c);
/* ops_step.c: a turn. */
void pk_op_step(pk_call *c);
/* A finished evaluation from the evaluator: completes its step and replies. */
void pk_server_on_completion(pk_server *s, pk_completion *done);

#endif
