/* The submit queue of the scheduler and of the broker: an inproc PUSH (submit, shutdown) to
 * the PULL of the thread that owns the jobs. A job travels as one pointer-sized frame; the
 * stop frame is {0, grace_ms}. */
#ifndef PK_SUBMIT_QUEUE_H
#define PK_SUBMIT_QUEUE_H

#include "pk_common.h"

/* Queues `job` (non-NULL; the receiver owns it once sent). PK_ERR_IO when it could not be. */
int pk_submit_send_job(void *push, void *job, pk_error *err);
/* Asks the thread to stop after grace_ms; says on stderr, as `who`, when it cannot. */
void pk_submit_send_stop(void *push, int grace_ms, const char *who);

enum pk_submit_kind { PK_SUBMIT_NONE, PK_SUBMIT_JOB, PK_SUBMIT_STOP };
/* Takes one frame without waiting: PK_SUBMIT_JOB (*job set), PK_SUBMIT_STOP (*grace_ms set),
 * or PK_SUBMIT_NONE when nothing is waiting. A frame of another size is skipped. */
int pk_submit_recv(void *pull, void **job, double *grace_ms);

#endif
