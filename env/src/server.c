/* The server's start-up and serving loop: one thread polls the client sockets (requests, to
 * dispatch.c: the ROUTER of the CURVE endpoints and the ZMTP front of the plain ones), the
 * evaluator's completion socket (to ops_step.c) and the store writer's (store_then_reply.c),
 * so evaluation never blocks request handling. */
#include "server.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zmq.h>

#include "dispatch.h"
#include "episode_restore.h"
#include "gpu_list.h"
#include "ops.h"
#include "reply.h"
#include "server_settings.h"
#include "server_sockets.h"
#include "store_then_reply.h"

#define BATCH 256          /* requests handled per poll round */
#define COMPLETION_BATCH 2 /* completions handled per poll round */
#define EXPIRY_PERIOD_MS 1000.0
#define PK_STORE_READ_BUSY_MS 200 /* the most a `trajectory` read waits on another's lock */

/* Returns -1 when no completion is waiting. */
static int take_completion(pk_server *s) {
    void *frame;
    if (pk_transport_recv_pointer(s->done_pull, &frame) < 0)
        return -1;
    pk_completion *done = frame;
    if (done) {
        double t0 = pk_now_ms();
        pk_server_on_completion(s, done);
        double dt = pk_now_ms() - t0;
        s->n.completion_ms_total += dt;
        s->n.completions++;
        if (dt > s->n.completion_ms_max)
            s->n.completion_ms_max = dt;
    } else
        fprintf(stderr, "pkgym serve: ignored a malformed completion frame\n");
    return 0;
}

/* Whether e has expired: idle for longer than --episode-idle-s, or its owner left (issue 27,
 * finding 3) and neither it nor anyone else used it for --episode-orphan-s since. */
static int expired(const pk_server *s, const pk_episode *e, double now, int *orphaned) {
    double quiet_ms = now - e->last_active_ms;
    *orphaned = 0;
    if (quiet_ms > s->opts.episode_idle_s * 1000.0)
        return 1;
    if (pk_client_is_gone(e->owner)) {
        double away_ms = now - e->owner->gone_ms;
        *orphaned = (away_ms < quiet_ms ? away_ms : quiet_ms) > s->opts.episode_orphan_s * 1000.0;
    }
    return *orphaned;
}

/* Closes expired episodes (their trajectories stay in the store), and sends turns a store
 * error left out to the store again (the disk may have room now). */
static void expire_idle(pk_server *s, double now) {
    for (size_t b = 0; b < PK_EPISODE_BUCKETS; b++) {
        pk_episode *e = s->episodes.bucket[b];
        while (e) {
            pk_episode *next = e->next;
            int orphaned = 0;
            if (!e->in_flight && !e->closed && expired(s, e, now, &orphaned)) {
                /* Expired is closed: a restart must not bring it back (issue 27, finding 6).
                 * It leaves memory once its turns are committed (one last try for unstored
                 * ones), so `trajectory` never misses one. */
                pk_journal_closed(s->journal, e->id);
                e->closed = 1;
                s->n.episodes_expired++;
                s->n.episodes_orphaned += (uint64_t)orphaned;
                pk_server_store_backlog(s, e);
                pk_server_release_if_closed(s, e);
            } else if (!e->in_flight) {
                pk_server_store_backlog(s, e);
            }
            e = next;
        }
    }
}

static void fail_unfinished(pk_server *s) {
    for (size_t b = 0; b < PK_EPISODE_BUCKETS; b++) {
        for (pk_episode *e = s->episodes.bucket[b]; e; e = e->next) {
            pk_pending_step *p = e->in_flight;
            if (!p)
                continue;
            pk_server_reply(
                s, &p->env, p->id_raw, p->id_len,
                pk_error_body(PK_E_INTERNAL, "the server stopped before this step was evaluated"));
            e->in_flight = NULL;
            pk_episode_recharge(e);
            pk_client_release(p->client, 0, 1);
            free(p->id_raw);
            pk_turn_free(&p->turn);
            free(p);
            s->n.steps_in_flight--;
        }
    }
}

int pk_server_poll_once(pk_server *s, int timeout_ms) {
    pk_presence_update(s->presence, pk_now_ms());
    pk_zmtp_front_tick(s->front);
    /* The front may hold whole messages its socket no longer signals: then no waiting. */
    int front_pending = pk_zmtp_front_pending(s->front);
    zmq_pollitem_t items[4] = {{s->router, 0, ZMQ_POLLIN, 0},
                               {s->done_pull, 0, ZMQ_POLLIN, 0},
                               {s->stored_pull, 0, ZMQ_POLLIN, 0},
                               {pk_zmtp_front_socket(s->front), 0, ZMQ_POLLIN, 0}};
    int n = zmq_poll(items, 4, front_pending ? 0 : timeout_ms);
    if (n < 0) {
        if (zmq_errno() == EINTR)
            return 0;
        fprintf(stderr, "pkgym serve: poll: %s\n", zmq_strerror(zmq_errno()));
        return -1;
    }
    /* Requests first and completions a few at a time: finishing a step (store commit,
     * feedback, next prompt) costs far more than a request, so a burst of completions
     * must not queue cheap requests like hello behind all of it. */
    for (int v = 0; v < 2; v++) {
        pk_via via = v ? PK_VIA_FRONT : PK_VIA_ROUTER;
        int ready =
            v ? (items[3].revents & ZMQ_POLLIN) || front_pending : (items[0].revents & ZMQ_POLLIN);
        for (int i = 0; i < BATCH && ready; i++) {
            double t0 = pk_now_ms();
            if (pk_dispatch_next(s, via) < 0)
                break;
            double dt = pk_now_ms() - t0;
            if (dt > s->n.request_ms_max)
                s->n.request_ms_max = dt;
        }
    }
    for (int i = 0; i < COMPLETION_BATCH && (items[1].revents & ZMQ_POLLIN); i++)
        if (take_completion(s) < 0)
            break;
    for (int i = 0; i < BATCH && (items[2].revents & ZMQ_POLLIN); i++)
        if (pk_server_take_stored(s) < 0)
            break;
    double now = pk_now_ms();
    if (now >= s->next_expiry_ms) {
        expire_idle(s, now);
        s->next_expiry_ms = now + EXPIRY_PERIOD_MS;
    }
    /* The front's buffered messages count as its socket having something. */
    return n + (front_pending && !(items[3].revents & ZMQ_POLLIN));
}

int pk_server_run(pk_server *s) {
    while (!*s->stop)
        if (pk_server_poll_once(s, 250) < 0)
            break;
    fprintf(stderr, "pkgym serve: stopping: %llu step(s) in flight, grace %d ms\n",
            (unsigned long long)s->n.steps_in_flight, s->opts.shutdown_grace_ms);
    /* Stop accepting (the ROUTER is no longer read), let the scheduler finish or cancel its
     * jobs, answer every step from their completions, then flush the store. */
    pk_evaluator_shutdown(&s->ev, s->opts.shutdown_grace_ms);
    while (take_completion(s) == 0)
        ;
    fail_unfinished(s);
    /* Every turn is now queued for the store: commit them all, then send their replies. */
    pk_store_writer_stop(s->writer);
    s->writer = NULL;
    while (pk_server_take_stored(s) == 0)
        ;
    return 0;
}

/* The local scheduler or the broker (evaluator.h), completing on the done endpoint. */
static int start_evaluator(pk_server *s, const char *done, pk_error *err) {
    pk_evaluator_opts eo;
    memset(&eo, 0, sizeof eo);
    eo.zmq_ctx = s->zctx;
    eo.done_endpoint = done;
    eo.compile_workers = s->opts.compile_workers;
    eo.queue_limit = s->opts.queue_limit;
    eo.n_gpus = s->opts.n_gpus;
    eo.gpus = s->opts.gpus;
    eo.n_nvml_gpus = (int)json_array_size(s->gpus);
    eo.jobs_per_gpu = s->opts.jobs_per_gpu;
    eo.rank_visibility = s->opts.rank_visibility;
    eo.gpu_mem_mb = s->opts.gpu_mem_mb;
    eo.worker_binds = s->opts.worker_binds;
    eo.n_worker_binds = s->opts.n_worker_binds;
    eo.heartbeat_ms = s->opts.worker_heartbeat_ms;
    eo.liveness = s->opts.worker_liveness;
    eo.worker_wait_s = s->opts.worker_wait_s;
    eo.worker_curve = s->opts.worker_curve_allow ? s->curve : NULL;
    eo.insecure = s->opts.insecure;
    eo.problems_dir = s->opts.problems_dir;
    eo.modules_dir = s->opts.modules_dir;
    eo.data_dir = s->opts.data_dir;
    eo.grace_ms = s->opts.shutdown_grace_ms;
    eo.remeasure_baseline = s->opts.remeasure_baseline;
    eo.baseline_max_cv = s->opts.baseline_max_cv;
    eo.baseline_max_age_s = s->opts.baseline_max_age_s;
    char *cache = pk_path_join(s->opts.data_dir, "cache");
    eo.cache_dir = cache;
    int rc = cache ? pk_evaluator_start(&s->ev, &eo, err)
                   : pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    s->sched_gpus = s->ev.local_gpus;
    free(cache);
    return rc;
}

int pk_server_init(pk_server *s, const pk_server_opts *o, volatile sig_atomic_t *stop,
                   pk_error *err) {
    memset(s, 0, sizeof *s);
    s->opts = *o;
    s->stop = stop;
    s->started_ms = pk_now_ms();
    s->next_expiry_ms = s->started_ms + EXPIRY_PERIOD_MS;
    s->max_request_bytes = o->max_action_bytes + (256u << 10);
    int rc =
        pk_profile_budget_init(&s->profile_budget, o->profile_per_minute, o->profile_seconds, err);
    if (rc)
        return rc;
    s->profile_budget_ready = 1;
    rc = pk_problem_set_load(o->problems_dir, o->modules_dir, &s->problems, err);
    if (rc)
        return rc;
    if ((rc = pk_server_settings_load(s, err)))
        return rc;
    /* It holds trajectories and model-written objects: for the server's user only. */
    int tightened = 0;
    if ((rc = pk_mkdir_private(o->data_dir, &tightened, err)))
        return rc;
    if (tightened)
        fprintf(stderr, "pkgym serve: %s was accessible to other users: made it 0700\n",
                o->data_dir);
    /* A server killed with SIGKILL left its jobs' directories, model code in them. */
    int reaped = pk_job_reap_orphans(NULL);
    if (reaped > 0)
        fprintf(stderr, "pkgym serve: removed %d job director%s of exited servers\n", reaped,
                reaped == 1 ? "y" : "ies");
    s->gpus = pk_gpu_list_json();
    char done[96];
    if ((rc = pk_server_open_sockets(s, done, sizeof done, err)) ||
        (rc = start_evaluator(s, done, err)))
        return rc;
    char *db = pk_path_join(o->data_dir, "trajectories.sqlite");
    pk_store *store = NULL;
    rc = db ? pk_store_open(db, &store, err) : pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    if (rc) {
        free(db);
        return rc;
    }
    /* `trajectory` of closed or expired episodes reads through its own read-only connection
     * (WAL: readers never wait for the writer thread's commits); a short busy timeout, as it
     * runs on the serving thread. */
    rc = db ? pk_store_open_readonly(db, &s->reader, err)
            : pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    free(db);
    if (rc) {
        pk_store_close(store);
        return rc;
    }
    pk_store_set_busy_timeout(s->reader, PK_STORE_READ_BUSY_MS);
    char stored[96];
    snprintf(stored, sizeof stored, "inproc://pkgym-stored-%p", (void *)s);
    int unlimited = 0;
    s->stored_pull = zmq_socket(s->zctx, ZMQ_PULL);
    if (!s->stored_pull ||
        zmq_setsockopt(s->stored_pull, ZMQ_RCVHWM, &unlimited, sizeof unlimited) != 0 ||
        zmq_bind(s->stored_pull, stored) != 0) {
        pk_store_close(store);
        return pk_error_set(err, PK_ERR_SYSTEM, "bind %s: %s", stored, zmq_strerror(zmq_errno()));
    }
    /* The writer owns the store once it runs; until then it is ours to close. */
    rc = pk_store_writer_start(store, s->zctx, stored, &s->writer, err);
    if (rc) {
        pk_store_close(store);
        return rc;
    }
    rc = pk_journal_open(o->data_dir, &s->journal, err);
    char *archive = rc ? NULL : pk_path_join(o->data_dir, PK_ARCHIVE_FILE);
    if (!rc) /* before the restore: restored episodes retrieve their examples from it */
        rc = archive ? pk_archive_open(archive, &s->archive, err)
                     : pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    free(archive);
    /* Episodes of the last run continue (docs/protocol.md, "Restart"). */
    if (!rc)
        rc = pk_episode_restore(s, err);
    return rc;
}

void pk_server_free(pk_server *s) {
    for (size_t b = 0; b < PK_EPISODE_BUCKETS; b++) {
        pk_episode *e = s->episodes.bucket[b];
        while (e) {
            pk_episode *next = e->next;
            pk_episode_free(e);
            e = next;
        }
        s->episodes.bucket[b] = NULL;
    }
    pk_evaluator_free(&s->ev); /* no job asks the budget after this */
    if (s->profile_budget_ready)
        pk_profile_budget_destroy(&s->profile_budget);
    s->profile_budget_ready = 0;
    pk_store_writer_stop(s->writer); /* only set here when init failed half-way */
    pk_store_close(s->reader);
    pk_journal_close(s->journal);
    pk_archive_close(s->archive);
    if (s->stored_pull)
        zmq_close(s->stored_pull);
    pk_presence_stop(s->presence);
    pk_zmtp_front_free(s->front);
    if (s->router)
        zmq_close(s->router);
    if (s->done_pull)
        zmq_close(s->done_pull);
    pk_curve_server_stop(s->curve);
    if (s->zctx)
        zmq_ctx_term(s->zctx);
    pk_problem_set_free(s->problems);
    json_decref(s->feedback_default);
    pk_hook_registry_free(s->hooks);
    for (size_t b = 0; b < PK_CLIENT_BUCKETS; b++) { /* what no episode or step holds now */
        while (s->clients.bucket[b]) {
            pk_client_entry *c = s->clients.bucket[b];
            s->clients.bucket[b] = c->next;
            free(c);
        }
    }
    json_decref(s->gpus);
    memset(s, 0, sizeof *s);
}
