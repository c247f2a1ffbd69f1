/* An episode's store jobs (episode_store.h): its turns as store rows, strings copied, so the
 * writer thread never reads the episode the serving thread changes. */
#include "episode_store.h"

#include <stdlib.h>
#include <string.h>

static char *dup_or_null(const char *text) {
    return text ? strdup(text) : NULL;
}

static int copy_turn_row(const pk_episode *e, int i, pk_turn_row *row) {
    const pk_turn_record *t = &e->turns[i];
    *row = (pk_turn_row){.episode_id = strdup(e->id),
                         .turn = i + 1, /* 1-based, as in the step reply */
                         .prompt = dup_or_null(t->prompt),
                         .action = dup_or_null(t->action),
                         .summary = dup_or_null(t->summary),
                         .code = dup_or_null(t->code),
                         .status = t->status,
                         .score = t->score,
                         .result_json = dup_or_null(t->result_json),
                         .feedback = dup_or_null(t->feedback),
                         .started_at = t->started_at,
                         .finished_at = t->finished_at};
    return !row->episode_id || (t->prompt && !row->prompt) || (t->action && !row->action) ||
                   (t->summary && !row->summary) || (t->code && !row->code) ||
                   (t->result_json && !row->result_json) || (t->feedback && !row->feedback)
               ? -1
               : 0;
}

pk_store_job *pk_episode_store_job(const pk_episode *e) {
    int from = e->n_stored, n = e->n_turns - e->n_stored;
    pk_store_job *j = calloc(1, sizeof *j);
    if (!j || n < 1 || !(j->turns = calloc((size_t)n, sizeof *j->turns))) {
        pk_store_job_free(j);
        return NULL;
    }
    int missing = 0;
    for (int i = 0; i < n && !missing; i++) {
        missing = copy_turn_row(e, from + i, &j->turns[i]);
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
