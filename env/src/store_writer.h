/* The trajectory store's writer thread: SQLite commits (fsync'd) never run on the serving
 * thread. Jobs are committed in submission order; each finished job comes back to the server
 * as a pointer frame on an inproc socket, and only then does the server reply, so a client
 * never sees a turn that is not yet durable. */
#ifndef PK_ENV_STORE_WRITER_H
#define PK_ENV_STORE_WRITER_H

#include "pk_common.h"
#include "pk_store.h"

typedef struct pk_store_writer pk_store_writer;

/* One unit of work: an episode's first row, or its newest turn together with the earlier ones
 * not stored yet (pk_store_put_turns), and the episode's returns when it ended. Strings are
 * owned by the job. */
typedef struct pk_store_job {
    int has_begin;
    pk_episode_row begin;
    char *episode_id; /* whose turns and returns these are */
    pk_turn *turns;   /* consecutive turns of that episode */
    int n_turns;
    int n_returns; /* > 0: finish the episode with these returns */
    double *returns;
    int rc;           /* outcome, set by the writer */
    int turns_stored; /* set by the writer: the turns were committed (even if the returns were
                         not) */
    pk_error err;
    void *user; /* the server's reply context */
    struct pk_store_job *next;
} pk_store_job;

/* Takes ownership of store. The writer connects a PUSH socket to done_endpoint (in zmq_ctx),
 * where the caller has bound a PULL socket. */
int pk_store_writer_start(pk_store *store, void *zmq_ctx, const char *done_endpoint,
                          pk_store_writer **out, pk_error *err);
void pk_store_writer_submit(pk_store_writer *w, pk_store_job *job);
/* Commits what is queued, sends the last completions, joins the thread, closes the store. */
void pk_store_writer_stop(pk_store_writer *w);
void pk_store_job_free(pk_store_job *job);

#endif
