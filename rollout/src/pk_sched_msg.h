/* The message between the dispatcher (ROUTER) and its workers (DEALER): one fixed-size frame.
 * The workers are threads of this process: a job travels as a pointer (inproc). Jobs for
 * other machines go through the broker instead, serialized (src/remote/pk_wire.h). */
#ifndef PK_SCHED_MSG_H
#define PK_SCHED_MSG_H

#include <stdint.h>

#include "pk_scheduler.h"

enum pk_sched_msg_type {
    PK_MSG_READY = 1, /* worker -> dispatcher: idle, send me work */
    PK_MSG_COMPILE,   /* dispatcher -> worker */
    PK_MSG_RUN,       /* dispatcher -> worker, with the granted GPUs */
    PK_MSG_DONE,      /* worker -> dispatcher: the stage finished */
    PK_MSG_STOP,      /* dispatcher -> worker: exit */
};

typedef struct pk_sched_msg {
    uint32_t type;
    int32_t n_gpus;
    uint64_t ticket;
    uint64_t job; /* (uintptr_t) of the job record */
    double busy_ms;
    int32_t gpus[PK_SCHED_MAX_GPUS];
} pk_sched_msg;

#endif
