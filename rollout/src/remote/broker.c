/* The broker's API and its thread (pk_broker.h). Submits reach the thread as pointer frames
 * on an inproc socket, as in the scheduler; the thread polls them and the workers' ROUTER,
 * sends heartbeats and places jobs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zmq.h>

#include "pk_baseline_cache.h"
#include "pk_broker_internal.h"
#include "pk_remote_socket.h"
#include "pk_submit_queue.h"

#define DEFAULT_QUEUE_LIMIT 1024
#define DEFAULT_WORKER_WAIT_S 120.0

void pk_bjob_list_push_back(pk_bjob_list *l, pk_bjob *j) {
    j->next = NULL;
    j->prev = l->tail;
    if (l->tail)
        l->tail->next = j;
    else
        l->head = j;
    l->tail = j;
    l->n++;
}

void pk_bjob_list_push_front(pk_bjob_list *l, pk_bjob *j) {
    j->prev = NULL;
    j->next = l->head;
    if (l->head)
        l->head->prev = j;
    else
        l->tail = j;
    l->head = j;
    l->n++;
}

void pk_bjob_list_remove(pk_bjob_list *l, pk_bjob *j) {
    if (j->prev)
        j->prev->next = j->next;
    else
        l->head = j->next;
    if (j->next)
        j->next->prev = j->prev;
    else
        l->tail = j->prev;
    j->prev = j->next = NULL;
    l->n--;
}

static void *open_socket(pk_broker *b, int type, const char *ep, int bind, pk_error *err) {
    void *s = zmq_socket(b->zctx, type);
    int zero = 0;
    if (!s) {
        pk_error_set(err, PK_ERR_SYSTEM, "zmq_socket: %s", zmq_strerror(zmq_errno()));
        return NULL;
    }
    if (zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero) ||
        zmq_setsockopt(s, ZMQ_SNDHWM, &zero, sizeof zero) ||
        zmq_setsockopt(s, ZMQ_RCVHWM, &zero, sizeof zero)) {
        pk_error_set(err, PK_ERR_SYSTEM, "zmq_setsockopt: %s", zmq_strerror(zmq_errno()));
        zmq_close(s);
        return NULL;
    }
    if ((bind ? zmq_bind(s, ep) : zmq_connect(s, ep)) != 0) {
        pk_error_set(err, PK_ERR_IO, "%s %s: %s", bind ? "bind" : "connect", ep,
                     zmq_strerror(zmq_errno()));
        zmq_close(s);
        return NULL;
    }
    return s;
}

static int open_router(pk_broker *b, pk_error *err) {
    b->router = pk_router_socket_new(b->zctx);
    if (!b->router)
        return pk_error_set(err, PK_ERR_SYSTEM, "zmq_socket: %s", zmq_strerror(zmq_errno()));
    int rc = pk_remote_socket_setup(b->router, PK_REMOTE_BROKER, err);
    if (!rc)
        rc = pk_zmtp_front_new(b->zctx, PK_WIRE_MAX_FRAME, &b->front, err);
    if (!rc) {
        /* As the ROUTER: the number of jobs in flight is bounded by the broker. */
        int zero = 0;
        void *fs = pk_zmtp_front_socket(b->front);
        if (zmq_setsockopt(fs, ZMQ_SNDHWM, &zero, sizeof zero) ||
            zmq_setsockopt(fs, ZMQ_RCVHWM, &zero, sizeof zero) ||
            zmq_setsockopt(fs, ZMQ_LINGER, &zero, sizeof zero))
            rc = pk_error_set(err, PK_ERR_SYSTEM, "worker socket options: %s",
                              zmq_strerror(zmq_errno()));
    }
    if (!rc)
        rc = pk_handshake_watch_start(&b->handshakes, b->zctx, b->router, err);
    for (int i = 0; !rc && i < b->opts.n_binds; i++) {
        char resolved[256] = "";
        rc = pk_remote_bind(b->router, pk_zmtp_front_socket(b->front), b->binds[i], b->opts.curve,
                            b->opts.insecure, resolved, sizeof resolved, err);
        int network = pk_endpoint_uses_curve(resolved);
        if (!rc && strncmp(resolved, "inproc://", 9) != 0)
            fprintf(stderr, "pkgym serve: worker endpoint %s%s\n", resolved,
                    !network        ? ""
                    : b->opts.curve ? " (CURVE)"
                                    : " (no CURVE)");
    }
    return rc;
}

static int dispatched_count(const pk_broker *b) {
    int n = 0;
    for (const pk_bworker *w = b->workers; w; w = w->next)
        n += w->jobs.n;
    return n;
}

/* What an operator can do about a refused worker connection. */
static const char *handshake_hint(const pk_broker *b, pk_handshake_kind kind) {
    switch (kind) {
    case PK_HANDSHAKE_REFUSED:
        return "its key is not in the --worker-curve-allow directory";
    case PK_HANDSHAKE_MECHANISM:
        return b->opts.curve ? "a worker without CURVE keys (pkgym worker --curve-server-key FILE "
                               "--curve-secret-key FILE), or CURVE on an endpoint without it"
                             : "a worker with CURVE keys on an endpoint without CURVE";
    case PK_HANDSHAKE_CRYPTOGRAPHIC:
        return "the worker's --curve-server-key is not this server's public key";
    default:
        return "not a pkgym worker, or it went away during the handshake";
    }
}

/* Failed handshakes on the worker endpoints: counted, and logged at most every 10 s per kind
 * (a peer retrying, or a port scanner, must not flood the log). */
static void read_handshakes(pk_broker *b) {
    pk_handshake_event ev;
    for (int round = 0; round < 256 && pk_handshake_watch_read(&b->handshakes, &ev) == 0; round++) {
        if (ev.kind == PK_HANDSHAKE_OK)
            continue;
        pthread_mutex_lock(&b->mu);
        if (ev.kind == PK_HANDSHAKE_REFUSED)
            b->stats.workers_refused++;
        else
            b->stats.handshakes_failed++;
        pthread_mutex_unlock(&b->mu);
        double now = pk_now_ms();
        if (b->handshake_logged_ms[ev.kind] > 0 && now - b->handshake_logged_ms[ev.kind] < 10000) {
            b->handshake_unlogged[ev.kind]++;
            continue;
        }
        char why[160];
        fprintf(stderr, "pkgym serve: refused a worker connection: %s: %s",
                pk_handshake_describe(&ev, why, sizeof why), handshake_hint(b, ev.kind));
        if (b->handshake_unlogged[ev.kind])
            fprintf(stderr, " (%lu more like it since the last such line)",
                    b->handshake_unlogged[ev.kind]);
        fprintf(stderr, "\n");
        b->handshake_logged_ms[ev.kind] = now;
        b->handshake_unlogged[ev.kind] = 0;
    }
}

/* Reads submits (new jobs, and the stop frame); returns when none is waiting. */
static void read_submits(pk_broker *b) {
    void *job;
    double grace_ms;
    int kind;
    while ((kind = pk_submit_recv(b->submit_pull, &job, &grace_ms)) != PK_SUBMIT_NONE) {
        pthread_mutex_lock(&b->mu);
        if (kind == PK_SUBMIT_JOB) {
            pk_bjob_list_push_back(&b->queue, job);
            b->stats.queued = b->queue.n;
        } else if (!b->stopping) {
            /* Queued jobs still go to workers until the deadline (broker_main). */
            b->stopping = 1;
            b->stop_deadline_ms = pk_now_ms() + grace_ms;
        }
        pthread_mutex_unlock(&b->mu);
    }
}

/* The next frame of a whole message from the ROUTER (front 0) or the front (1). */
static int next_frame(pk_broker *b, int front, zmq_msg_t *part, int *more) {
    if (front) {
        uint32_t conn;
        return b->front ? pk_zmtp_front_recv(b->front, part, more, &conn) : -1;
    }
    if (zmq_msg_recv(part, b->router, ZMQ_DONTWAIT) < 0)
        return -1;
    *more = zmq_msg_more(part);
    return 0;
}

static void read_workers(pk_broker *b, int front) {
    for (int round = 0; round < 1024; round++) {
        zmq_msg_t id, body;
        zmq_msg_init(&id);
        zmq_msg_init(&body);
        int more = 0, rest = 0;
        if (next_frame(b, front, &id, &more) < 0) {
            zmq_msg_close(&id);
            zmq_msg_close(&body);
            return;
        }
        int ok = more && next_frame(b, front, &body, &rest) == 0;
        /* A message of more frames is not ours: drain and drop it. */
        for (rest = ok && rest; rest;) {
            zmq_msg_t extra;
            zmq_msg_init(&extra);
            if (next_frame(b, front, &extra, &rest) != 0)
                rest = 0;
            zmq_msg_close(&extra);
            ok = 0;
        }
        if (ok) {
            /* Set by the ZAP handler: the CURVE key that the connection authenticated with. */
            const char *key = zmq_msg_gets(&body, "User-Id");
            pthread_mutex_lock(&b->mu);
            pk_broker_on_message(b, zmq_msg_data(&id), zmq_msg_size(&id), key, zmq_msg_data(&body),
                                 zmq_msg_size(&body));
            pthread_mutex_unlock(&b->mu);
        }
        zmq_msg_close(&id);
        zmq_msg_close(&body);
    }
}

static void *broker_main(void *arg) {
    pk_broker *b = arg;
    double next_beat = pk_now_ms();
    for (;;) {
        zmq_pollitem_t items[4] = {{b->submit_pull, 0, ZMQ_POLLIN, 0},
                                   {b->router, 0, ZMQ_POLLIN, 0},
                                   {b->handshakes.pair, 0, ZMQ_POLLIN, 0},
                                   {pk_zmtp_front_socket(b->front), 0, ZMQ_POLLIN, 0}};
        double wait = next_beat - pk_now_ms();
        pk_zmtp_front_tick(b->front);
        if (zmq_poll(items, 4,
                     pk_zmtp_front_pending(b->front) ? 0
                     : wait < 1                      ? 1
                     : wait > 100                    ? 100
                                                     : (long)wait) < 0 &&
            zmq_errno() == ETERM)
            break;
        read_submits(b);
        read_workers(b, 0);
        read_workers(b, 1);
        read_handshakes(b);
        double now = pk_now_ms();
        pthread_mutex_lock(&b->mu);
        if (now >= next_beat) {
            pk_broker_heartbeat(b, now);
            pk_broker_expire_unplaceable(b, now);
            next_beat = now + b->opts.heartbeat_ms / 2.0;
        }
        int done = 0;
        if (b->stopping && now >= b->stop_deadline_ms) {
            /* The grace is over: what is queued or still at a worker is answered cancelled
             * (a late result from a worker finds no job and is dropped). */
            pk_broker_cancel_all(b, "queued");
            pk_broker_cancel_all(b, "dispatched");
            done = 1;
        } else if (b->stopping && b->queue.n == 0 && !dispatched_count(b)) {
            done = 1;
        } else {
            double t0 = pk_now_ms();
            pk_broker_dispatch(b);
            double dt = pk_now_ms() - t0;
            if (dt > b->stats.dispatch_ms_max)
                b->stats.dispatch_ms_max = dt;
        }
        pthread_mutex_unlock(&b->mu);
        if (done)
            break;
    }
    return NULL;
}

static int check_opts(const pk_broker_opts *o, pk_error *err) {
    if (!o || !o->zmq_ctx || !o->done_endpoint)
        return pk_error_set(err, PK_ERR_INVALID,
                            "the broker needs a zmq context and done_endpoint");
    if (o->n_binds < 1 || o->n_binds > PK_BROKER_MAX_BINDS)
        return pk_error_set(err, PK_ERR_INVALID, "the broker needs 1..%d worker endpoints",
                            PK_BROKER_MAX_BINDS);
    if (o->heartbeat_ms < 0 || o->liveness < 0 || o->queue_limit < 0 || o->worker_wait_s < 0)
        return pk_error_set(err, PK_ERR_INVALID, "negative broker setting");
    return PK_OK;
}

int pk_broker_create(const pk_broker_opts *opts, pk_broker **out, pk_error *err) {
    *out = NULL;
    int rc = check_opts(opts, err);
    if (rc)
        return rc;
    pk_broker *b = calloc(1, sizeof *b);
    if (!b)
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    b->opts = *opts;
    b->zctx = opts->zmq_ctx;
    if (!b->opts.heartbeat_ms)
        b->opts.heartbeat_ms = 1000;
    if (!b->opts.liveness)
        b->opts.liveness = 5;
    if (!b->opts.queue_limit)
        b->opts.queue_limit = DEFAULT_QUEUE_LIMIT;
    if (!(b->opts.worker_wait_s > 0))
        b->opts.worker_wait_s = DEFAULT_WORKER_WAIT_S;
    pthread_mutex_init(&b->mu, NULL);
    b->accepting = 1;
    b->next_ticket = 1;
    b->next_uid = 1;
    b->t_start_ms = pk_now_ms();
    b->stats.curve = opts->curve != NULL;
    b->departed = json_array();
    b->done_endpoint = strdup(opts->done_endpoint);
    int nomem = !b->departed || !b->done_endpoint;
    for (int i = 0; i < opts->n_binds; i++)
        nomem |= !(b->binds[i] = strdup(opts->binds[i]));
    if (opts->cache_dir)
        nomem |= !(b->cache_dir = strdup(opts->cache_dir));
    snprintf(b->submit_ep, sizeof b->submit_ep, "inproc://pk-broker-submit-%p", (void *)b);
    if (nomem)
        rc = pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    if (!rc && b->cache_dir)
        rc = pk_baseline_cache_open(b->cache_dir, &b->baseline_dir, err);
    if (!rc && !(b->submit_pull = open_socket(b, ZMQ_PULL, b->submit_ep, 1, err)))
        rc = err ? err->code : PK_ERR_IO;
    if (!rc && !(b->submit_push = open_socket(b, ZMQ_PUSH, b->submit_ep, 0, err)))
        rc = err ? err->code : PK_ERR_IO;
    if (!rc && !(b->done_push = open_socket(b, ZMQ_PUSH, b->done_endpoint, 0, err)))
        rc = err ? err->code : PK_ERR_IO;
    if (!rc)
        rc = open_router(b, err);
    if (!rc && pthread_create(&b->thread, NULL, broker_main, b) != 0)
        rc = pk_error_set(err, PK_ERR_SYSTEM, "cannot start the broker thread");
    if (rc) {
        pk_broker_free(b);
        return rc;
    }
    b->thread_started = 1;
    *out = b;
    return PK_OK;
}

static int enqueue(pk_broker *b, pk_bjob *j, uint64_t *ticket, pk_error *err) {
    int rc = PK_OK;
    pthread_mutex_lock(&b->mu);
    if (!b->accepting) {
        rc = pk_error_set(err, PK_ERR_BUSY, "the broker is shutting down");
    } else if (b->in_flight >= b->opts.queue_limit) {
        b->stats.overloaded++;
        rc =
            pk_error_set(err, PK_ERR_OVERLOADED, "overloaded: %d jobs queued or running (limit %d)",
                         b->in_flight, b->opts.queue_limit);
    } else {
        j->ticket = b->next_ticket;
        rc = pk_submit_send_job(b->submit_push, j, err);
        if (!rc) {
            b->next_ticket++;
            b->in_flight++;
            b->stats.submitted++;
            if (ticket)
                *ticket = j->ticket;
        }
    }
    pthread_mutex_unlock(&b->mu);
    return rc;
}

int pk_broker_submit(pk_broker *b, const pk_problem *p, const char *source,
                     const pk_eval_opts *opts, const char *gpu_model, void *user, uint64_t *ticket,
                     pk_error *err) {
    if (!b || !p || !source)
        return pk_error_set(err, PK_ERR_INVALID, "submit needs a broker, problem and source");
    pk_bjob *j = calloc(1, sizeof *j);
    if (!j || !(j->source = strdup(source))) {
        free(j);
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory queueing a job");
    }
    j->kind = PK_JOB_EVAL;
    j->problem = p;
    j->user = user;
    pk_problem_version(p, j->version);
    if (opts)
        j->opts = *opts;
    j->opts.work_root = j->opts.launcher = NULL;
    j->opts.n_gpus = 0; /* the worker's scheduler picks the GPUs */
    j->needs_gpu = pk_problem_needs_gpu(p);
    j->world = j->opts.world_size > 0 ? j->opts.world_size : pk_problem_world_size(p);
    if (j->needs_gpu && gpu_model)
        snprintf(j->gpu_model, sizeof j->gpu_model, "%s", gpu_model);
    j->t_submit_ms = pk_now_ms();
    int rc = enqueue(b, j, ticket, err);
    if (rc) {
        free(j->source);
        free(j);
    }
    return rc;
}

int pk_broker_submit_noop(pk_broker *b, void *user, uint64_t *ticket, pk_error *err) {
    pk_bjob *j = calloc(1, sizeof *j);
    if (!j)
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory queueing a job");
    j->kind = PK_JOB_NOOP;
    j->user = user;
    j->t_submit_ms = pk_now_ms();
    int rc = enqueue(b, j, ticket, err);
    if (rc)
        free(j);
    return rc;
}

void pk_broker_get_stats(pk_broker *b, pk_broker_stats *out) {
    pthread_mutex_lock(&b->mu);
    *out = b->stats;
    out->workers = 0;
    out->gpus = 0;
    out->dispatched = 0;
    for (pk_bworker *w = b->workers; w; w = w->next) {
        out->workers++;
        out->gpus += w->gpu_slots;
        out->dispatched += w->jobs.n;
    }
    out->queued = b->queue.n;
    pthread_mutex_unlock(&b->mu);
}

json_t *pk_broker_workers_json(pk_broker *b) {
    json_t *a = json_array();
    pthread_mutex_lock(&b->mu);
    double now = pk_now_ms();
    for (pk_bworker *w = b->workers; a && w; w = w->next)
        json_array_append_new(a, pk_broker_worker_json(b, w, now));
    size_t i;
    json_t *d;
    json_array_foreach(b->departed, i, d) json_array_append(a, d);
    pthread_mutex_unlock(&b->mu);
    return a;
}

void pk_broker_shutdown(pk_broker *b, int grace_ms) {
    if (!b)
        return;
    pthread_mutex_lock(&b->mu);
    int was = b->accepting;
    b->accepting = 0;
    if (was && b->thread_started)
        pk_submit_send_stop(b->submit_push, grace_ms, "broker");
    pthread_mutex_unlock(&b->mu);
    if (b->thread_started) {
        pthread_join(b->thread, NULL);
        b->thread_started = 0;
    }
}

void pk_broker_free(pk_broker *b) {
    if (!b)
        return;
    pk_broker_shutdown(b, 0);
    pthread_mutex_lock(&b->mu);
    pk_broker_cancel_all(b, "queued");
    pk_broker_cancel_all(b, "dispatched");
    while (b->workers) {
        pk_bworker *w = b->workers;
        b->workers = w->next;
        json_decref(w->info);
        json_decref(w->problems);
        json_decref(w->load);
        free(w);
    }
    pthread_mutex_unlock(&b->mu);
    pk_handshake_watch_stop(&b->handshakes);
    pk_zmtp_front_free(b->front);
    void *socks[] = {b->submit_push, b->submit_pull, b->router, b->done_push};
    for (size_t i = 0; i < sizeof socks / sizeof *socks; i++)
        if (socks[i])
            zmq_close(socks[i]);
    for (int i = 0; i < PK_BROKER_MAX_BINDS; i++)
        free(b->binds[i]);
    json_decref(b->departed);
    free(b->done_endpoint);
    free(b->cache_dir);
    free(b->baseline_dir);
    pthread_mutex_destroy(&b->mu);
    free(b);
}
