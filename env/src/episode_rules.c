/* An episode's end and its returns (episode_rules.h). A step and a restart's check of an
 * episode whose last turn was stored but not its end apply the same rules. */
#include "episode_rules.h"

#include <stdio.h>
#include <stdlib.h>

int pk_episode_ended(const pk_episode *e, int *terminated, int *truncated) {
    const pk_turn *last = e->n_turns ? &e->turns[e->n_turns - 1] : NULL;
    int term = last && e->stop_on_correct && last->status == PK_STATUS_CORRECT;
    int trunc = last && !term && e->n_turns >= e->max_turns;
    if (terminated)
        *terminated = term;
    if (truncated)
        *truncated = trunc;
    return term || trunc;
}

void pk_episode_finish(pk_episode *e) {
    e->done = 1;
    e->returns = calloc((size_t)e->n_turns, sizeof *e->returns);
    if (!e->returns) {
        fprintf(stderr, "pkgym serve: episode %s: out of memory for returns\n", e->id);
        return;
    }
    for (int i = 0; i < e->n_turns; i++)
        e->returns[i] = e->turns[i].score;
    pk_reward_returns(&e->reward, e->returns, e->n_turns, e->returns);
}

json_t *pk_returns_json(const pk_episode *e) {
    if (!e->done || !e->returns)
        return json_null();
    json_t *a = json_array();
    for (int i = 0; a && i < e->n_turns; i++)
        json_array_append_new(a, json_real(e->returns[i]));
    return a;
}
