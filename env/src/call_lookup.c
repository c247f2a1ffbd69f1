/* Lookups of what a request names (call_lookup.h). */
#include "call_lookup.h"

#include <stdlib.h>

pk_client_entry *pk_call_client(pk_call *c) {
    pk_client_entry *e = pk_client_get(&c->s->clients, c->client_id);
    if (!e)
        pk_call_error(c, PK_E_INTERNAL, "out of memory");
    return e;
}

const pk_problem *pk_call_problem(pk_call *c) {
    char *id;
    pk_error err;
    if (pk_request_str(c->req, "problem", 1, 256, &id, &err)) {
        pk_call_error(c, PK_E_BAD_REQUEST, "%s", err.message);
        return NULL;
    }
    const pk_problem *p = pk_problem_set_find(c->s->problems, id);
    if (!p)
        pk_call_error(c, PK_E_UNKNOWN_PROBLEM, "no problem '%s' (see list_problems)", id);
    free(id);
    return p;
}

/* The episode id is its capability: the client that names an episode becomes its owner, so that
 * it does not expire as left behind while the client using it is connected (issue 27, finding
 * 3). A reconnect has a new routing id, and the old connection's close may reach the server
 * only after the new one named the episode (a claim only from owners known to have left lost
 * the episode then); a restored episode's owner is nobody. Within the caller's limits. */
static void claim(pk_call *c, pk_episode *e) {
    pk_client_entry *me = pk_client_get(&c->s->clients, c->client_id);
    if (!me || me == e->owner)
        return;
    if (me->episodes < c->s->opts.max_client_episodes &&
        me->bytes + e->bytes <= c->s->opts.max_client_bytes)
        pk_episode_set_owner(e, me);
    else
        pk_client_drop_if_unused(me);
}

pk_episode *pk_call_episode(pk_call *c) {
    char *id;
    pk_error err;
    if (pk_request_str(c->req, "episode", 1, 256, &id, &err)) {
        pk_call_error(c, PK_E_BAD_REQUEST, "%s", err.message);
        return NULL;
    }
    pk_episode *e = pk_episode_find(&c->s->episodes, id);
    if (!e || e->closed)
        pk_call_error(c, PK_E_UNKNOWN_EPISODE,
                      "no open episode '%s' (never opened, closed, or expired after "
                      "limits.episode_idle_s, or limits.episode_orphan_s after its client left; "
                      "`trajectory` still reads those from the store)",
                      id);
    free(id);
    if (!e || e->closed)
        return NULL;
    claim(c, e);
    return e;
}
