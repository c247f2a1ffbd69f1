/* The server: one thread polls the ROUTER socket (requests) and the scheduler's completion
 * socket, so evaluation never blocks request handling. */
#include "server.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zmq.h>

#include "pk_client.h"
#include "pk_env.h"
#include "pk_summarizer.h"
#include "episode_restore.h"

#define BATCH 256          /* requests handled per poll round */
#define COMPLETION_BATCH 2 /* completions handled per poll round */
#define EXPIRY_PERIOD_MS 1000.0
#define PK_STORE_READ_BUSY_MS 200 /* the most a `trajectory` read waits on another's lock */

void pk_server_opts_default(pk_server_opts *o) {
    memset(o, 0, sizeof *o);
    o->problems_dir = pk_problems_default_dir();
    o->modules_dir = pk_problems_default_modules_dir();
    o->templates_dir = NULL; /* the summarizer's default (installed, or the source tree's) */
    o->data_dir = PK_DEFAULT_DATA_DIR;
    o->max_action_bytes = 1u << 20;
    o->max_episodes = 4096;
    o->episode_idle_s = 3600;
    o->max_turns_limit = 64;
    o->queue_limit = 1024;
    o->n_gpus = -1;
    o->shutdown_grace_ms = 10000;
    o->baseline_max_cv = 0.1;
    o->baseline_max_age_s = 86400;
    o->max_client_episodes = 1024;
    o->max_client_steps = 256;
    o->episode_orphan_s = 300;
    o->max_episode_bytes = (size_t)64 << 20;
    o->max_client_bytes = (size_t)1 << 30;
    o->max_held_bytes = (size_t)4 << 30;
}

json_t *pk_error_body(const char *code, const char *message) {
    return json_pack("{s:b, s:{s:s, s:s}}", "ok", 0, "error", "code", code, "message", message);
}

static void send_encoded(pk_server *s, const pk_envelope *env, const msgpack_object *id,
                         const char *id_raw, size_t id_len, json_t *body) {
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    if (!body)
        body = pk_error_body(PK_E_INTERNAL, "out of memory building the reply");
    if (!json_object_get(body, "ok"))
        json_object_set_new(body, "ok", json_true());
    int has_id = id || id_raw;
    int bad = msgpack_pack_map(&pk, json_object_size(body) + (has_id ? 1 : 0));
    if (!bad && has_id) {
        bad = msgpack_pack_str(&pk, 2) || msgpack_pack_str_body(&pk, "id", 2);
        if (!bad)
            bad = id ? msgpack_pack_object(&pk, *id) : msgpack_sbuffer_write(&sb, id_raw, id_len);
    }
    const char *key;
    json_t *val;
    json_object_foreach(body, key, val) {
        size_t n = strlen(key);
        if (!bad)
            bad = msgpack_pack_str(&pk, n) || msgpack_pack_str_body(&pk, key, n) ||
                  pk_msgpack_pack_json(&pk, val);
    }
    if (!bad && pk_transport_send(s->router, env, sb.data, sb.size) != 0)
        fprintf(stderr, "pkgym serve: send failed: %s\n", zmq_strerror(zmq_errno()));
    if (bad)
        fprintf(stderr, "pkgym serve: could not encode a reply\n");
    msgpack_sbuffer_destroy(&sb);
    json_decref(body);
}

void pk_server_reply(pk_server *s, const pk_envelope *env, const char *id_raw, size_t id_len,
                     json_t *body) {
    send_encoded(s, env, NULL, id_raw, id_len, body);
}

void pk_call_ok(pk_call *c, json_t *body) {
    send_encoded(c->s, &c->env, c->req ? c->req->id : NULL, NULL, 0, body);
}

void pk_call_error(pk_call *c, const char *code, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (strcmp(code, PK_E_BAD_REQUEST) == 0)
        c->s->n.bad_requests++;
    pk_call_ok(c, pk_error_body(code, msg));
}

static const struct {
    const char *name;
    void (*run)(pk_call *c);
} ops[] = {
    {"hello", pk_op_hello},
    {"list_problems", pk_op_list_problems},
    {"get_problem", pk_op_get_problem},
    {"reset", pk_op_reset},
    {"step", pk_op_step},
    {"close", pk_op_close},
    {"trajectory", pk_op_trajectory},
    {"stats", pk_op_stats},
};

/* Handles one request; returns -1 when the socket has nothing more to read. */
static int serve_one(pk_server *s) {
    pk_call call = {.s = s};
    zmq_msg_t body;
    zmq_msg_init(&body);
    int r = pk_transport_recv(s->router, &call.env, &body);
    if (r < 0) {
        zmq_msg_close(&body);
        return -1;
    }
    s->n.requests++;
    pk_client_identity(&body, &call.env, call.client_id);
    if (r == 0) { /* the sender is here: attach it to its connection */
        pk_presence_update(s->presence, pk_now_ms());
        pk_client_entry *sender = pk_client_get(&s->clients, call.client_id);
        pk_presence_seen(s->presence, sender, &body, pk_now_ms());
        pk_client_drop_if_unused(sender);
    }
    if (r == 1) {
        if (call.env.n > 0)
            pk_call_error(&call, PK_E_BAD_REQUEST,
                          "expected the envelope and then one frame holding a msgpack map");
        zmq_msg_close(&body);
        return 0;
    }
    pk_request req;
    pk_error err;
    pk_error_clear(&err);
    int rc = pk_request_decode(&req, zmq_msg_data(&body), zmq_msg_size(&body), s->max_request_bytes,
                               &err);
    call.req = &req;
    if (rc) {
        pk_call_error(&call, PK_E_BAD_REQUEST, "%s", err.message);
    } else {
        size_t i;
        for (i = 0; i < sizeof ops / sizeof *ops; i++)
            if (strcmp(ops[i].name, req.op) == 0)
                break;
        if (i < sizeof ops / sizeof *ops)
            ops[i].run(&call);
        else
            pk_call_error(&call, PK_E_UNKNOWN_OP, "unknown op '%s'", req.op);
    }
    pk_request_free(&req);
    zmq_msg_close(&body);
    return 0;
}

pk_client_entry *pk_call_client(pk_call *c) {
    pk_client_entry *e = pk_client_get(&c->s->clients, c->client_id);
    if (!e)
        pk_call_error(c, PK_E_INTERNAL, "out of memory");
    return e;
}

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

/* Returns -1 when no stored job is waiting. */
static int take_stored(pk_server *s) {
    zmq_msg_t m;
    zmq_msg_init(&m);
    if (zmq_msg_recv(&m, s->stored_pull, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&m);
        return -1;
    }
    pk_store_job *job = NULL;
    if (zmq_msg_size(&m) == sizeof job)
        memcpy(&job, zmq_msg_data(&m), sizeof job);
    zmq_msg_close(&m);
    if (job)
        on_stored(s, job);
    return 0;
}

/* Returns -1 when no completion is waiting. */
static int take_completion(pk_server *s) {
    zmq_msg_t m;
    zmq_msg_init(&m);
    if (zmq_msg_recv(&m, s->done_pull, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&m);
        return -1;
    }
    pk_completion *done = NULL;
    if (zmq_msg_size(&m) == sizeof done)
        memcpy(&done, zmq_msg_data(&m), sizeof done);
    zmq_msg_close(&m);
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

void pk_server_store_backlog(pk_server *s, pk_episode *e) {
    if (e->n_stored >= e->n_turns || e->store_pending > 0 || !s->writer)
        return;
    pk_store_job *job = pk_episode_store_job(e);
    if (job)
        pk_server_store_then_reply(s, job, NULL, NULL, 0, NULL, NULL, e);
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
    zmq_pollitem_t items[3] = {{s->router, 0, ZMQ_POLLIN, 0},
                               {s->done_pull, 0, ZMQ_POLLIN, 0},
                               {s->stored_pull, 0, ZMQ_POLLIN, 0}};
    int n = zmq_poll(items, 3, timeout_ms);
    if (n < 0) {
        if (zmq_errno() == EINTR)
            return 0;
        fprintf(stderr, "pkgym serve: poll: %s\n", zmq_strerror(zmq_errno()));
        return -1;
    }
    /* Requests first and completions a few at a time: finishing a step (store commit,
     * feedback, next prompt) costs far more than a request, so a burst of completions
     * must not queue cheap requests like hello behind all of it. */
    for (int i = 0; i < BATCH && (items[0].revents & ZMQ_POLLIN); i++) {
        double t0 = pk_now_ms();
        if (serve_one(s) < 0)
            break;
        double dt = pk_now_ms() - t0;
        if (dt > s->n.request_ms_max)
            s->n.request_ms_max = dt;
    }
    for (int i = 0; i < COMPLETION_BATCH && (items[1].revents & ZMQ_POLLIN); i++)
        if (take_completion(s) < 0)
            break;
    for (int i = 0; i < BATCH && (items[2].revents & ZMQ_POLLIN); i++)
        if (take_stored(s) < 0)
            break;
    double now = pk_now_ms();
    if (now >= s->next_expiry_ms) {
        expire_idle(s, now);
        s->next_expiry_ms = now + EXPIRY_PERIOD_MS;
    }
    return n;
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
    while (take_stored(s) == 0)
        ;
    return 0;
}

/* Every client endpoint through the one secure-bind function (pk_curve.h): CURVE on network
 * transports when configured, plain ones only on loopback unless --insecure. */
static int bind_all(pk_server *s, pk_error *err) {
    int tcp = 0;
    /* The key pair may serve only the worker endpoints (no --curve-allow). */
    const pk_curve_server *curve = s->opts.curve_allow ? s->curve : NULL;
    for (int i = 0; i < s->opts.n_binds; i++) {
        char resolved[256];
        int rc = pk_socket_bind_secure(s->router, s->opts.binds[i], curve, PK_CURVE_DOMAIN_CLIENTS,
                                       s->opts.insecure, resolved, sizeof resolved, err);
        if (rc)
            return rc;
        int network = pk_endpoint_uses_curve(resolved);
        tcp |= network;
        fprintf(stderr, "pkgym serve: bound %s%s\n", resolved,
                !network ? ""
                : curve  ? " (CURVE)"
                         : " (no CURVE)");
    }
    if (curve && !tcp)
        fprintf(stderr, "pkgym serve: note: CURVE applies to network endpoints (tcp://, ws://, "
                        "...); none is bound\n");
    return PK_OK;
}

/* CURVE: the server's key pair and the ZAP handler, before any socket is bound. One key pair
 * serves the client and the worker endpoints; each has its own ZAP domain and allow directory,
 * so a client key never admits a worker, nor a worker key a client. */
static int init_curve(pk_server *s, pk_error *err) {
    const char *key = s->opts.curve_secret_key, *allow = s->opts.curve_allow,
               *worker_allow = s->opts.worker_curve_allow;
    if (!key && !allow && !worker_allow)
        return PK_OK;
    if (!key)
        return pk_error_set(err, PK_ERR_INVALID,
                            "%s needs --curve-secret-key FILE: the server's key pair (pkgym "
                            "keygen), by which clients and workers authenticate the server",
                            allow ? "--curve-allow DIR" : "--worker-curve-allow DIR");
    if (!allow && !worker_allow)
        return pk_error_set(err, PK_ERR_INVALID,
                            "--curve-secret-key FILE needs --curve-allow DIR (the directory of "
                            "authorized client keys), --worker-curve-allow DIR (authorized "
                            "worker keys), or both");
    if (worker_allow && s->opts.n_worker_binds == 0)
        return pk_error_set(err, PK_ERR_INVALID,
                            "--worker-curve-allow applies to --worker-bind endpoints, and none "
                            "is given");
    int rc = pk_curve_server_start(s->zctx, key, &s->curve, err);
    if (rc == PK_OK && allow)
        rc = pk_curve_server_allow(s->curve, PK_CURVE_DOMAIN_CLIENTS, allow, err);
    if (rc == PK_OK && worker_allow)
        rc = pk_curve_server_allow(s->curve, PK_BROKER_ZAP_DOMAIN, worker_allow, err);
    if (rc == PK_OK)
        fprintf(stderr,
                "pkgym serve: CURVE server key %s; clients allowed from %s; workers "
                "allowed from %s\n",
                pk_curve_server_public_key(s->curve), allow ? allow : "(no CURVE for clients)",
                worker_allow ? worker_allow : "(no CURVE for workers)");
    return rc;
}

static int load_json_file(const char *path, json_t **out, pk_error *err) {
    json_error_t je;
    *out = json_load_file(path, 0, &je);
    if (!*out)
        return pk_error_set(err, PK_ERR_INVALID, "%s:%d: %s", path, je.line, je.text);
    if (!json_is_object(*out)) {
        json_decref(*out);
        *out = NULL;
        return pk_error_set(err, PK_ERR_INVALID, "%s: must hold a JSON object", path);
    }
    return PK_OK;
}

/* The operator's hooks: --hook NAME=SPEC and the feedback config's "hook_registry" (taken out
 * of the defaults: clients never see or set it). */
static int init_hooks(pk_server *s, pk_error *err) {
    s->hooks = pk_hook_registry_new();
    if (!s->hooks)
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    for (int i = 0; i < s->opts.n_hook_args; i++) {
        int rc = pk_hook_registry_add_arg(s->hooks, s->opts.hook_args[i], err);
        if (rc)
            return rc;
    }
    json_t *reg = json_object_get(s->feedback_default, "hook_registry");
    if (reg) {
        char *text = json_dumps(reg, JSON_COMPACT | JSON_ENCODE_ANY);
        int rc = text ? pk_hook_registry_add_json(s->hooks, text, err)
                      : pk_error_set(err, PK_ERR_NOMEM, "out of memory");
        free(text);
        if (rc) {
            char inner[sizeof err->message];
            snprintf(inner, sizeof inner, "%s", err->message);
            return pk_error_set(err, rc, "%s: %s", s->opts.feedback_config_path, inner);
        }
        json_object_del(s->feedback_default, "hook_registry");
    }
    for (size_t i = 0; i < pk_hook_registry_count(s->hooks); i++) {
        const char *name = pk_hook_registry_name(s->hooks, i);
        fprintf(stderr, "pkgym serve: hook %s = %s (runs in the sandbox)\n", name,
                pk_hook_registry_spec(s->hooks, name));
    }
    return PK_OK;
}

static int init_settings(pk_server *s, pk_error *err) {
    pk_reward_config_default(&s->reward_default);
    if (s->opts.reward_config_path) {
        char *text;
        size_t len;
        int rc = pk_read_file(s->opts.reward_config_path, &text, &len, err);
        if (rc)
            return rc;
        rc = pk_reward_config_merge_json(&s->reward_default, text, err);
        free(text);
        if (rc)
            return rc;
    }
    if (s->opts.feedback_config_path) {
        int rc = load_json_file(s->opts.feedback_config_path, &s->feedback_default, err);
        if (rc)
            return rc;
    } else {
        s->feedback_default = json_object();
    }
    int rc = init_hooks(s, err);
    if (rc)
        return rc;
    /* Fail at start, not at the first reset, when the feedback settings are wrong. */
    char *fb = json_dumps(s->feedback_default, JSON_COMPACT);
    pk_summarizer *probe = NULL;
    rc = fb ? pk_summarizer_create_with_hooks(fb, s->hooks, s->opts.templates_dir, &probe, err)
            : pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    free(fb);
    pk_summarizer_free(probe);
    return rc;
}

static int init_sockets(pk_server *s, pk_error *err) {
    s->zctx = zmq_ctx_new();
    if (!s->zctx)
        return pk_error_set(err, PK_ERR_SYSTEM, "zmq_ctx_new: %s", zmq_strerror(zmq_errno()));
    s->router = pk_router_socket_new(s->zctx);
    s->done_pull = zmq_socket(s->zctx, ZMQ_PULL);
    if (!s->router || !s->done_pull)
        return pk_error_set(err, PK_ERR_SYSTEM, "zmq_socket: %s", zmq_strerror(zmq_errno()));
    /* Before any connection: every one is seen from its start. */
    int prc = pk_presence_start(s->zctx, s->router, &s->presence, err);
    if (prc)
        return prc;
    /* Frames far beyond the request limit are dropped by ZeroMQ before they are buffered;
     * those up to 4x the limit still get a clear bad_request. */
    int64_t maxmsg = (int64_t)s->max_request_bytes * 4;
    int hwm = 100000, linger = 1000, unlimited = 0;
    if (zmq_setsockopt(s->router, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg) ||
        zmq_setsockopt(s->router, ZMQ_SNDHWM, &hwm, sizeof hwm) ||
        zmq_setsockopt(s->router, ZMQ_RCVHWM, &hwm, sizeof hwm) ||
        zmq_setsockopt(s->router, ZMQ_LINGER, &linger, sizeof linger) ||
        zmq_setsockopt(s->done_pull, ZMQ_RCVHWM, &unlimited, sizeof unlimited))
        return pk_error_set(err, PK_ERR_SYSTEM, "zmq_setsockopt: %s", zmq_strerror(zmq_errno()));
    char done[96];
    snprintf(done, sizeof done, "inproc://pkgym-done-%p", (void *)s);
    if (zmq_bind(s->done_pull, done) != 0)
        return pk_error_set(err, PK_ERR_SYSTEM, "bind %s: %s", done, zmq_strerror(zmq_errno()));
    int rc = init_curve(s, err);
    if (rc == PK_OK)
        rc = bind_all(s, err);
    if (rc)
        return rc;

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
    rc = cache ? pk_evaluator_start(&s->ev, &eo, err)
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
    int rc = pk_problem_set_load(o->problems_dir, o->modules_dir, &s->problems, err);
    if (rc)
        return rc;
    if ((rc = init_settings(s, err)))
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
    if ((rc = init_sockets(s, err)))
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
    pk_evaluator_free(&s->ev);
    pk_store_writer_stop(s->writer); /* only set here when init failed half-way */
    pk_store_close(s->reader);
    pk_journal_close(s->journal);
    pk_archive_close(s->archive);
    if (s->stored_pull)
        zmq_close(s->stored_pull);
    pk_presence_stop(s->presence);
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
