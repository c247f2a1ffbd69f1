/* What of an episode goes to the trajectory store: the rows of its turns not stored yet and,
 * once it has ended, its returns. */
#ifndef PK_ENV_EPISODE_STORE_H
#define PK_ENV_EPISODE_STORE_H

#include "episodes.h"
#include "store_writer.h"

/* The store job of e's turns not stored yet (its newest turn and any earlier one a store error
 * left out) and of its returns when it has ended; NULL when out of memory or nothing is
 * unstored. */
pk_store_job *pk_episode_store_job(const pk_episode *e);

#endif
