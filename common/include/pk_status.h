/* The outcome of one evaluated turn. Shared by the harness, rewards, feedback and the server. */
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
    PK_STATUS_COUNT
} pk_status;

/* Protocol name: "format_error", "rejected", ... */
const char *pk_status_name(pk_status s);
/* Returns -1 when name is unknown. */
int pk_status_from_name(const char *name);

#ifdef __cplusplus
}
#endif
#endif
