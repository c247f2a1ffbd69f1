#include "pk_submit_stop.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <zmq.h>

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
