/* The stop frame of a submit queue (the scheduler's and the broker's): jobs travel as one
 * pointer-sized frame; {0, grace_ms} asks the queue's thread to stop after grace_ms. */
#ifndef PK_SUBMIT_STOP_H
#define PK_SUBMIT_STOP_H

/* Sends the stop frame on the PUSH socket `push`; says on stderr, as `who`, when it cannot. */
void pk_submit_send_stop(void *push, int grace_ms, const char *who);

#endif
