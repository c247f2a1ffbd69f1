/* The server's own journal (<data-dir>/server-journal.sqlite), beside the trajectory store:
 * what a restart must know that the store does not hold. Which episode had a step being
 * evaluated (and of which turn), and which episodes were closed. Written on the serving
 * thread; WAL with synchronous=NORMAL, so a write survives a SIGKILL of the server (not a
 * power loss: then a restart may take an in-flight step for a never-sent one, or restore a
 * closed episode). The trajectory store's schema is not touched. */
#ifndef PK_ENV_SERVER_JOURNAL_H
#define PK_ENV_SERVER_JOURNAL_H

#include "pk_common.h"

typedef struct pk_journal pk_journal;

int pk_journal_open(const char *data_dir, pk_journal **out, pk_error *err);
void pk_journal_close(pk_journal *j);

/* turn: 0-based index of the turn being evaluated. Failures are logged, never fatal. */
void pk_journal_step_begin(pk_journal *j, const char *episode, int turn, double started_at);
/* The step ended without a turn (its reply says why), or the episode ended. */
void pk_journal_step_end(pk_journal *j, const char *episode);
void pk_journal_closed(pk_journal *j, const char *episode);

typedef struct pk_journal_step {
    int turn; /* -1: none */
    double started_at;
} pk_journal_step;

/* What the journal says of one episode (for the restore). */
int pk_journal_is_closed(pk_journal *j, const char *episode);
pk_journal_step pk_journal_step_of(pk_journal *j, const char *episode);
/* Drops the entries of every episode not in keep (n ids: those a later restart could still
 * restore), once the restore is done. */
void pk_journal_keep_only(pk_journal *j, const char *const *keep, int n);

#endif
