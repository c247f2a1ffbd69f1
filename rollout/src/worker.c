/* A worker thread: a DEALER socket connected to the dispatcher's ROUTER. It announces itself,
 * then runs one stage per message (compile, or run on the GPUs it was given) and reports. */
#include "pk_sched_internal.h"

#include <stdio.h>
#include <string.h>
#include <zmq.h>

static void run_stage(pk_scheduler *s, const pk_sched_msg *m, pk_sched_msg *reply) {
    pk_sched_job *j = (pk_sched_job *)(uintptr_t)m->job;
    pk_sched_task *t = &j->task;
    double t0 = pk_now_ms();
    int rc;
    int final;
    if (m->type == PK_MSG_COMPILE) {
        t->run_needed = 0;
        rc = s->exec.compile(s->exec.ctx, t);
        final = rc || !t->run_needed;
    } else {
        rc = s->exec.run(s->exec.ctx, t, m->gpus, m->n_gpus);
        /* A first infra_error is run again (dispatcher.c): the job is kept for it. */
        final = rc || t->res->status != PK_STATUS_INFRA_ERROR || j->infra_tries > 0;
    }
    if (rc)
        j->completion->harness_rc = rc;
    if (final && t->state)
        s->exec.release(s->exec.ctx, t);
    reply->busy_ms = pk_now_ms() - t0;
    reply->ticket = m->ticket;
    reply->job = m->job;
}

static void *give_up(pk_sched_worker *w, void *sock) {
    fprintf(stderr, "pkgym scheduler: worker %d cannot reach the dispatcher: %s\n", w->index,
            zmq_strerror(zmq_errno()));
    if (sock)
        zmq_close(sock);
    pthread_mutex_lock(&w->s->mu);
    w->dead = 1;
    pthread_mutex_unlock(&w->s->mu);
    return NULL;
}

void *pk_sched_worker_main(void *arg) {
    pk_sched_worker *w = arg;
    pk_scheduler *s = w->s;
    void *sock = zmq_socket(s->zctx, ZMQ_DEALER);
    if (!sock)
        return give_up(w, NULL);
    char id[16];
    int n = snprintf(id, sizeof id, "w%d", w->index);
    int zero = 0;
    pk_sched_msg msg = {.type = PK_MSG_READY};
    if (zmq_setsockopt(sock, ZMQ_ROUTING_ID, id, (size_t)n) ||
        zmq_setsockopt(sock, ZMQ_LINGER, &zero, sizeof zero) ||
        zmq_setsockopt(sock, ZMQ_SNDHWM, &zero, sizeof zero) ||
        zmq_setsockopt(sock, ZMQ_RCVHWM, &zero, sizeof zero) || zmq_connect(sock, s->work_ep) ||
        zmq_send(sock, &msg, sizeof msg, 0) != (int)sizeof msg)
        return give_up(w, sock);
    for (;;) {
        pk_sched_msg m;
        int len = zmq_recv(sock, &m, sizeof m, 0);
        if (len < 0 && zmq_errno() == EINTR)
            continue;
        if (len < 0 || m.type == PK_MSG_STOP)
            break;
        if (len != (int)sizeof m || (m.type != PK_MSG_COMPILE && m.type != PK_MSG_RUN))
            continue;
        pk_sched_msg reply = {.type = PK_MSG_DONE};
        run_stage(s, &m, &reply);
        /* Unsent, the dispatcher would wait for this job forever: this worker counts as dead,
         * and the server answers the job's step when it stops (server.c). */
        if (zmq_send(sock, &reply, sizeof reply, 0) != (int)sizeof reply)
            return give_up(w, sock);
    }
    zmq_close(sock);
    return NULL;
}
