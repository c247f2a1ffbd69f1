/* The store writer thread (see store_writer.h). */
#include "store_writer.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zmq.h>

struct pk_store_writer {
    pk_store *store;
    void *zctx;
    char endpoint[128];
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pk_store_job *head, *tail;
    int stopping;
    int started;
};

void pk_store_job_free(pk_store_job *j) {
    if (!j)
        return;
    free((char *)j->begin.episode_id);
    free((char *)j->begin.problem_id);
    free((char *)j->begin.group);
    free((char *)j->begin.config_json);
    free((char *)j->begin.task_prompt);
    free(j->episode_id);
    for (int i = 0; j->turns && i < j->n_turns; i++)
        pk_turn_free(&j->turns[i]);
    free(j->turns);
    free(j->returns);
    free(j);
}

static void commit(pk_store *store, pk_store_job *j) {
    pk_error_clear(&j->err);
    j->rc = PK_OK;
    if (j->has_begin)
        j->rc = pk_store_begin_episode(store, &j->begin, &j->err);
    if (!j->rc && j->n_turns > 0) {
        j->rc = pk_store_put_turns(store, j->episode_id, j->turns, j->n_turns, &j->err);
        j->turns_stored = j->rc == PK_OK;
    }
    if (!j->rc && j->n_returns > 0)
        j->rc = pk_store_finish_episode(store, j->episode_id, j->returns, j->n_returns, &j->err);
}

static void *run(void *arg) {
    pk_store_writer *w = arg;
    void *push = zmq_socket(w->zctx, ZMQ_PUSH);
    int unlimited = 0, linger = -1;
    if (push && (zmq_setsockopt(push, ZMQ_SNDHWM, &unlimited, sizeof unlimited) ||
                 zmq_setsockopt(push, ZMQ_LINGER, &linger, sizeof linger) ||
                 zmq_connect(push, w->endpoint))) {
        zmq_close(push);
        push = NULL;
    }
    if (!push)
        fprintf(stderr, "pkgym serve: store writer cannot reach the server: %s\n",
                zmq_strerror(zmq_errno()));
    for (;;) {
        pthread_mutex_lock(&w->mu);
        while (!w->head && !w->stopping)
            pthread_cond_wait(&w->cv, &w->mu);
        pk_store_job *j = w->head;
        if (j) {
            w->head = j->next;
            if (!w->head)
                w->tail = NULL;
        }
        pthread_mutex_unlock(&w->mu);
        if (!j)
            break; /* stopping and drained */
        j->next = NULL;
        commit(w->store, j);
        if (!push || zmq_send(push, &j, sizeof j, 0) != (int)sizeof j) {
            fprintf(stderr, "pkgym serve: a stored job could not be handed back\n");
            pk_store_job_free(j); /* its reply is lost, but the server keeps running */
        }
    }
    if (push)
        zmq_close(push);
    return NULL;
}

int pk_store_writer_start(pk_store *store, void *zmq_ctx, const char *done_endpoint,
                          pk_store_writer **out, pk_error *err) {
    *out = NULL;
    pk_store_writer *w = calloc(1, sizeof *w);
    if (!w)
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    w->store = store;
    w->zctx = zmq_ctx;
    snprintf(w->endpoint, sizeof w->endpoint, "%s", done_endpoint);
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    if (pthread_create(&w->thread, NULL, run, w) != 0) {
        pthread_mutex_destroy(&w->mu);
        pthread_cond_destroy(&w->cv);
        free(w);
        return pk_error_set(err, PK_ERR_SYSTEM, "cannot start the store writer thread");
    }
    w->started = 1;
    *out = w;
    return PK_OK;
}

void pk_store_writer_submit(pk_store_writer *w, pk_store_job *job) {
    job->next = NULL;
    pthread_mutex_lock(&w->mu);
    if (w->tail)
        w->tail->next = job;
    else
        w->head = job;
    w->tail = job;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

void pk_store_writer_stop(pk_store_writer *w) {
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    w->stopping = 1;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    if (w->started)
        pthread_join(w->thread, NULL);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    pk_store_close(w->store);
    free(w);
}
