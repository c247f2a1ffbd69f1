/* An episode's store jobs (episode_store.h): its turns, strings copied (pk_turn_copy), so the
 * writer thread never reads the episode the serving thread changes. */
#include "episode_store.h"

#include <stdlib.h>
#include <string.h>

pk_store_job *pk_episode_store_job(const pk_episode *e) {
    int from = e->n_stored, n = e->n_turns - e->n_stored;
    pk_store_job *j = calloc(1, sizeof *j);
    if (!j || n < 1 || !(j->episode_id = strdup(e->id)) ||
        !(j->turns = calloc((size_t)n, sizeof *j->turns))) {
        pk_store_job_free(j);
        return NULL;
    }
    int missing = 0;
    for (int i = 0; i < n && !missing; i++) {
        missing = pk_turn_copy(&j->turns[i], &e->turns[from + i]);
        j->n_turns = i + 1; /* what was copied is freed with the job */
    }
    if (!missing && e->done && e->returns) {
        j->returns = malloc((size_t)e->n_turns * sizeof *j->returns);
        missing = !j->returns;
        if (j->returns) {
            memcpy(j->returns, e->returns, (size_t)e->n_turns * sizeof *j->returns);
            j->n_returns = e->n_turns;
        }
    }
    if (missing) {
        pk_store_job_free(j);
        return NULL;
    }
    return j;
}
