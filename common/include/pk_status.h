/* The outcome of one evaluated turn (or of one run, for infra_error). Shared by the harness,
 * rewards, feedback and the server. */
#ifndef PK_STATUS_H
#define PK_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum pk_status {
    PK_STATUS_FORMAT_ERROR = 0, /* no code block / no entry point in the response */
    PK_STATUS_REJECTED,         /* an anti-hacking rule fired */
    PK_STATUS_COMPILE_ERROR,
    PK_STATUS_RUNTIME_ERROR,
    PK_STATUS_TIMEOUT,
    PK_STATUS_INCORRECT,
    PK_STATUS_CORRECT,
    /* Ours, not the candidate's: the run failed before the candidate's code was loaded
     * (sandbox, device, CUDA context, NCCL communicator, arena, problem module), or in a run
     * that has no candidate (the reference timed alone). Never scored, stored or fed back: the
     * scheduler retries it, then the step is answered with the protocol error infra_error. */
    PK_STATUS_INFRA_ERROR,
    PK_STATUS_COUNT
} pk_status;

/* The statuses a recorded turn can have: all but infra_error. */
#define PK_STATUS_TURN_COUNT PK_STATUS_INFRA_ERROR

/* Protocol name: "format_error", "rejected", ... */
const char *pk_status_name(pk_status s);
/* Returns -1 when name is unknown. */
int pk_status_from_name(const char *name);

#ifdef __cplusplus
}
#endif
#endif
