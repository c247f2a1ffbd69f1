/* Replies held until their store job is committed (store_then_reply.h). */
#include "store_then_reply.h"

#include <stdio.h>
#include <stdlib.h>

#include "episode_store.h"
#include "reply.h"

/* A reply waiting for its store commit. */
typedef struct deferred_reply {
    pk_envelope env;
    char *id_raw;
    size_t id_len;
    json_t *body;
    pk_episode *new_episode;
    pk_episode *turn_episode; /* kept in memory until the job is committed */
    int no_reply;
} deferred_reply;

void pk_server_release_if_closed(pk_server *s, pk_episode *e) {
    if (e && e->closed && !e->in_flight && e->store_pending == 0) {
        pk_episode_remove(&s->episodes, e);
        pk_episode_free(e);
    }
}

void pk_server_store_then_reply(pk_server *s, pk_store_job *job, const pk_envelope *env,
                                char *id_raw, size_t id_len, json_t *body, pk_episode *new_episode,
                                pk_episode *turn_episode) {
    deferred_reply *d = calloc(1, sizeof *d);
    if (!d) {
        pk_server_reply(s, env, id_raw, id_len, pk_error_body(PK_E_INTERNAL, "out of memory"));
        free(id_raw);
        json_decref(body);
        pk_episode_free(new_episode);
        pk_server_release_if_closed(s, turn_episode);
        pk_store_job_free(job);
        return;
    }
    *d = (deferred_reply){.id_raw = id_raw,
                          .id_len = id_len,
                          .body = body,
                          .new_episode = new_episode,
                          .turn_episode = turn_episode,
                          .no_reply = env == NULL};
    if (env)
        d->env = *env;
    if (new_episode)
        s->resets_pending++;
    if (turn_episode)
        turn_episode->store_pending++;
    job->user = d;
    pk_store_writer_submit(s->writer, job);
}

static void on_stored(pk_server *s, pk_store_job *job) {
    deferred_reply *d = job->user;
    if (job->rc) {
        s->n.store_errors++;
        fprintf(stderr, "pkgym serve: trajectory store: %s\n", job->err.message);
    }
    json_t *body = d->body;
    if (d->new_episode) {
        s->resets_pending--;
        if (job->rc) {
            char msg[600];
            snprintf(msg, sizeof msg, "trajectory store: %s", job->err.message);
            json_decref(body);
            body = pk_error_body(PK_E_INTERNAL, msg);
            pk_episode_free(d->new_episode);
        } else {
            d->new_episode->last_active_ms = pk_now_ms();
            pk_episode_recharge(d->new_episode);
            pk_episode_insert(&s->episodes, d->new_episode);
            s->n.episodes_started++;
        }
    }
    if (job->turns_stored && d->turn_episode) {
        pk_episode *e = d->turn_episode;
        int last = job->turns[job->n_turns - 1].turn;
        if (last > e->n_stored)
            e->n_stored = last;
        /* The store has them now: keep only what the next prompt needs (finding 4). */
        pk_episode_trim_stored(e);
        pk_episode_recharge(e);
    }
    json_t *info = json_object_get(body, "info");
    if (job->rc && !d->new_episode && json_is_object(info)) {
        /* The turn happened and is in memory: say that it is not in the store, and how far the
         * store has the episode (issue 27, finding 5); its next store job sends the unstored
         * turns again, so the store never has a gap. */
        json_object_set_new(info, "store_error", json_string(job->err.message));
        if (d->turn_episode)
            json_object_set_new(info, "stored_turns", json_integer(d->turn_episode->n_stored));
    }
    if (d->no_reply)
        json_decref(body);
    else
        pk_server_reply(s, &d->env, d->id_raw, d->id_len, body);
    if (d->turn_episode) {
        /* From here on the store has the turn: a closed episode may leave memory. */
        d->turn_episode->store_pending--;
        pk_server_release_if_closed(s, d->turn_episode);
    }
    free(d->id_raw);
    free(d);
    pk_store_job_free(job);
}

int pk_server_take_stored(pk_server *s) {
    void *job;
    if (pk_transport_recv_pointer(s->stored_pull, &job) < 0)
        return -1;
    if (job)
        on_stored(s, job);
    return 0;
}

void pk_server_store_backlog(pk_server *s, pk_episode *e) {
    if (e->n_stored >= e->n_turns || e->store_pending > 0 || !s->writer)
        return;
    pk_store_job *job = pk_episode_store_job(e);
    if (job)
        pk_server_store_then_reply(s, job, NULL, NULL, 0, NULL, NULL, e);
}
