/* The server's side of the archive of verified kernels: correct turns go in. */
#ifndef PK_ENV_ARCHIVE_FEED_H
#define PK_ENV_ARCHIVE_FEED_H

#include "server_state.h"

/* Archives e's newest turn when it is correct (r: its evaluation). */
void pk_server_archive_turn(pk_server *s, const pk_episode *e, const pk_eval_result *r);

#endif
