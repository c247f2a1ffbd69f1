#include "pk_submit_queue.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <zmq.h>

int pk_submit_send_job(void *push, void *job, pk_error *err) {
    uint64_t ptr = (uint64_t)(uintptr_t)job;
    if (zmq_send(push, &ptr, sizeof ptr, 0) != (int)sizeof ptr)
        return pk_error_set(err, PK_ERR_IO, "queueing the job: %s", zmq_strerror(zmq_errno()));
    return PK_OK;
}

void pk_submit_send_stop(void *push, int grace_ms, const char *who) {
    uint64_t stop[2] = {0, (uint64_t)(grace_ms > 0 ? grace_ms : 0)};
    /* An unbounded inproc queue to a bound PULL: nothing but a signal can fail it. */
    int sent;
    while ((sent = zmq_send(push, stop, sizeof stop, 0)) < 0 && zmq_errno() == EINTR)
        ;
    if (sent != (int)sizeof stop)
        fprintf(stderr, "pkgym %s: cannot send the stop to its thread: %s\n", who,
                zmq_strerror(zmq_errno()));
}

int pk_submit_recv(void *pull, void **job, double *grace_ms) {
    for (;;) {
        uint64_t buf[2];
        int n = zmq_recv(pull, buf, sizeof buf, ZMQ_DONTWAIT);
        if (n < 0)
            return PK_SUBMIT_NONE;
        if (n == (int)sizeof buf[0] && buf[0]) {
            *job = (void *)(uintptr_t)buf[0];
            return PK_SUBMIT_JOB;
        }
        if (n == (int)sizeof buf && !buf[0]) {
            *grace_ms = (double)buf[1];
            return PK_SUBMIT_STOP;
        }
    }
}
