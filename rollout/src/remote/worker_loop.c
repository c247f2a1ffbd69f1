/* The worker's event loop (pk_worker.h): one thread polls the broker socket and its
 * scheduler's completions; jobs run on the scheduler's threads, so heartbeats never wait
 * for a job. Each connection is a session with its own routing id; a job remembers the
 * session it came in, and its result is sent only within that session. */
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <zmq.h>

#include "pk_handshake_watch.h"
#include "pk_mp.h"
#include "pk_remote_socket.h"
#include "pk_wire.h"
#include "pk_worker_internal.h"
#include "pk_zmtp_probe.h"

typedef struct remote_job {
    uint64_t id;
    int attempt;
    uint64_t session;
    double t_arrive_ms;
    int world, needs_gpu, report_baseline;
} remote_job;

typedef struct worker_loop {
    pk_worker_ctx *w;
    void *zctx;
    int own_ctx;
    pk_scheduler *sched;
    void *done_pull;
    char done_ep[96];
    void *sock;
    pk_handshake_watch handshakes;        /* of sock (none over inproc://) */
    int handshake_noted;                  /* a failed handshake of this session was logged */
    pk_handshake_event handshake_failure; /* ... or is waiting to be (handshake_failure_ms) */
    double handshake_failure_ms;
    int mechanism_probed; /* this session asked the broker's mechanism (probe_mechanism) */
    int fatal;            /* the broker refused us for good: fatal_err says why */
    pk_error fatal_err;
    uint64_t session;
    char identity[224];
    double last_recv_ms, last_send_ms;
    int backoff_ms;
    int in_flight; /* jobs of the current session on the scheduler */
    int draining;
    uint64_t done, stale, sessions;
} worker_loop;

static void say(const worker_loop *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void say(const worker_loop *l, const char *fmt, ...) {
    if (l->w->o.quiet)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "pkgym worker %s: ", l->w->name);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}

static void send_buf(worker_loop *l, msgpack_sbuffer *sb) {
    if (l->sock && zmq_send(l->sock, sb->data, sb->size, ZMQ_DONTWAIT) >= 0)
        l->last_send_ms = pk_now_ms();
    msgpack_sbuffer_destroy(sb);
}

static void send_simple(worker_loop *l, int type) {
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    if (pk_wire_pack_simple(&sb, type) == PK_OK)
        send_buf(l, &sb);
    else
        msgpack_sbuffer_destroy(&sb);
}

static void send_heartbeat(worker_loop *l) {
    pk_scheduler_stats st;
    pk_scheduler_get_stats(l->sched, &st);
    json_t *load = json_pack(
        "{s:i, s:i, s:i, s:i, s:i, s:f, s:I, s:I, s:I, s:I, s:I}", "queued",
        st.queued_compile + st.queued_run, "compiling", st.compiling, "running", st.running,
        "gpus_busy", st.gpus_busy, "in_flight", l->in_flight, "gpu_busy_ms", st.gpu_busy_ms, "done",
        (json_int_t)st.done, "compile_hits", (json_int_t)st.compile_cache_hits, "compile_misses",
        (json_int_t)st.compile_cache_misses, "baseline_hits", (json_int_t)st.baseline_cache_hits,
        "stale_results_dropped", (json_int_t)l->stale);
    /* GPUs held and kernel-busy apart (rollout/README.md, "Sharing GPUs"). */
    json_object_set_new(load, "gpu_kernel_ms", json_real(st.gpu_kernel_ms));
    json_object_set_new(load, "gpu_timing_ms", json_real(st.gpu_timing_ms));
    json_object_set_new(load, "resident_jobs", json_integer(st.resident_jobs));
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    if (pk_wire_pack_heartbeat(&sb, load) == PK_OK)
        send_buf(l, &sb);
    else
        msgpack_sbuffer_destroy(&sb);
    json_decref(load);
}

static void send_result(worker_loop *l, pk_wire_result *r) {
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    if (pk_wire_pack_result(&sb, r) == PK_OK) {
        send_buf(l, &sb);
    } else {
        msgpack_sbuffer_destroy(&sb);
        say(l, "out of memory packing the result of job %llu", (unsigned long long)r->id);
    }
}

/* A result that carries no verdict (the job did not run). */
static void refuse(worker_loop *l, const pk_wire_job *j, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void refuse(worker_loop *l, const pk_wire_job *j, int code, const char *fmt, ...) {
    pk_wire_result r;
    memset(&r, 0, sizeof r);
    pk_eval_result_init(&r.result);
    r.id = j->id;
    r.attempt = j->attempt;
    r.code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r.message, sizeof r.message, fmt, ap);
    va_end(ap);
    send_result(l, &r);
}

static void open_session(worker_loop *l) {
    uint64_t r = 0;
    if (getrandom(&r, sizeof r, 0) != (ssize_t)sizeof r)
        r = (uint64_t)pk_now_ns() ^ ((uint64_t)l->sessions << 32);
    l->session = r ? r : 1;
    l->sessions++;
    l->in_flight = 0;
    snprintf(l->identity, sizeof l->identity, "%.180s#%016llx", l->w->name,
             (unsigned long long)l->session);
    l->handshake_noted = 0;
    l->handshake_failure_ms = 0;
    l->mechanism_probed = 0;
    const char *ep = l->w->o.connect;
    pk_error err;
    pk_error_clear(&err);
    l->sock = zmq_socket(l->zctx, ZMQ_DEALER);
    int rc = l->sock ? pk_remote_socket_setup(l->sock, PK_REMOTE_WORKER, &err)
                     : pk_error_set(&err, PK_ERR_SYSTEM, "%s", zmq_strerror(zmq_errno()));
    if (!rc && zmq_setsockopt(l->sock, ZMQ_ROUTING_ID, l->identity, strlen(l->identity)) != 0)
        rc = pk_error_set(&err, PK_ERR_SYSTEM, "routing id: %s", zmq_strerror(zmq_errno()));
    if (!rc && strncmp(ep, "inproc://", 9) != 0)
        rc = pk_handshake_watch_start(&l->handshakes, l->zctx, l->sock, &err);
    if (!rc)
        rc = pk_remote_connect(l->sock, ep, l->w->o.curve, &err);
    if (rc) {
        say(l, "cannot connect to %s: %s", ep, err.message);
        pk_handshake_watch_stop(&l->handshakes);
        if (l->sock)
            zmq_close(l->sock);
        l->sock = NULL;
    }
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    if (l->sock && pk_wire_pack_ready(&sb, l->w->info) == PK_OK)
        send_buf(l, &sb);
    else
        msgpack_sbuffer_destroy(&sb);
    l->last_recv_ms = pk_now_ms();
}

static void close_session(worker_loop *l) {
    pk_handshake_watch_stop(&l->handshakes);
    if (l->sock)
        zmq_close(l->sock);
    l->sock = NULL;
    l->session = 0; /* results of its jobs are dropped from now on */
}

/* Sleeps up to ms, waking early when asked to stop (completions are read meanwhile). */
static void nap(worker_loop *l, int ms, volatile sig_atomic_t *stop);

static void reconnect(worker_loop *l, volatile sig_atomic_t *stop, const char *why) {
    say(l, "%s: reconnecting in %d ms as a new session (%d job(s) of this session abandoned)", why,
        l->backoff_ms, l->in_flight);
    close_session(l);
    nap(l, l->backoff_ms, stop);
    l->backoff_ms =
        l->backoff_ms * 2 > l->w->o.reconnect_max_ms ? l->w->o.reconnect_max_ms : l->backoff_ms * 2;
    if (!*stop)
        open_session(l);
}

/* One end uses CURVE and the other does not: a configuration error that no retry fixes. */
static void mechanism_mismatch(worker_loop *l) {
    const char *ep = l->w->o.connect;
    l->fatal = 1;
    if (l->w->o.curve)
        pk_error_set(&l->fatal_err, PK_ERR_INVALID,
                     "the broker at %s does not use CURVE on this endpoint, and this worker "
                     "does (--curve-server-key, --curve-secret-key or "
                     "PKGYM_WORKER_CURVE_*): the server needs --curve-secret-key and "
                     "--worker-curve-allow, or the worker no keys",
                     ep);
    else
        pk_error_set(&l->fatal_err, PK_ERR_INVALID,
                     "the broker at %s requires CURVE: give --curve-server-key FILE (the "
                     "server's .pub) and --curve-secret-key FILE (this worker's .key, from "
                     "pkgym keygen, whose .pub the operator puts in --worker-curve-allow), "
                     "or set PKGYM_WORKER_CURVE_SERVER_KEY and "
                     "PKGYM_WORKER_CURVE_SECRET_KEY",
                     ep);
}

/* A handshake that did not complete may be a mechanism mismatch that libzmq could not see (the
 * broker closed before its greeting left, pk_zmtp_probe.h): the broker's greeting says. Once a
 * session; a probe that fails changes nothing (the handshake is retried as before). */
static void probe_mechanism(worker_loop *l) {
    if (l->mechanism_probed)
        return;
    l->mechanism_probed = 1;
    char mechanism[21];
    pk_error err = {0};
    if (pk_zmtp_probe_mechanism(l->w->o.connect, 1000, mechanism, &err) != PK_OK)
        return;
    if (strcmp(mechanism, l->w->o.curve ? "CURVE" : "NULL") != 0)
        mechanism_mismatch(l);
}

/* The broker's answers to this session's handshakes. A refused key and a security mechanism
 * that differs are configuration errors that no retry fixes: the worker stops with an error
 * (ZeroMQ would not retry them either). Anything else is retried, and logged once a session. */
static void read_handshakes(worker_loop *l) {
    const char *ep = l->w->o.connect;
    const pk_curve_client_keys *keys = l->w->o.curve;
    pk_handshake_event ev;
    while (!l->fatal && pk_handshake_watch_read(&l->handshakes, &ev) == 0) {
        if (ev.kind == PK_HANDSHAKE_OK)
            continue;
        if (ev.kind == PK_HANDSHAKE_REFUSED && ev.value == 400) {
            l->fatal = 1;
            pk_error_set(&l->fatal_err, PK_ERR_INVALID,
                         "the broker at %s refused this worker's CURVE key %s (ZAP status 400): "
                         "the operator must copy this worker's .pub into the server's "
                         "--worker-curve-allow directory",
                         ep, keys ? keys->client.public_key : "(none)");
        } else if (ev.kind == PK_HANDSHAKE_MECHANISM) {
            mechanism_mismatch(l);
        } else {
            if (ev.kind == PK_HANDSHAKE_FAILED)
                probe_mechanism(l);
            if (!l->fatal && !l->handshake_noted && l->handshake_failure_ms == 0) {
                l->handshake_failure = ev;
                l->handshake_failure_ms = pk_now_ms();
            }
        }
    }
    /* Logged a little later: a peer that refuses a mechanism also drops the connection, and
     * that event may come first. */
    if (!l->fatal && l->handshake_failure_ms > 0 && pk_now_ms() - l->handshake_failure_ms > 300) {
        l->handshake_noted = 1;
        l->handshake_failure_ms = 0;
        char why[160];
        say(l, "the handshake with %s failed: %s%s; retrying", ep,
            pk_handshake_describe(&l->handshake_failure, why, sizeof why),
            keys && l->handshake_failure.kind != PK_HANDSHAKE_REFUSED
                ? " (is --curve-server-key the broker's public key, the server's .pub?)"
                : "");
    }
}

static void submit_job(worker_loop *l, pk_wire_job *j) {
    pk_worker_ctx *w = l->w;
    if (l->draining) {
        refuse(l, j, PK_WIRE_REFUSED, "worker %s is stopping", w->name);
        return;
    }
    if (j->kind == PK_JOB_NOOP) {
        /* Bench only: answered here, no harness, no verdict. */
        refuse(l, j, PK_WIRE_OK, "no-op job");
        return;
    }
    size_t index = 0;
    const pk_problem *p = pk_worker_find_problem(w, j->problem, &index);
    char why[300];
    if (!p) {
        refuse(l, j, PK_WIRE_MISSING_PROBLEM,
               "worker %s has no problem '%s' (%zu problems under %s)", w->name, j->problem,
               pk_problem_set_count(w->problems), w->o.problems_dir);
        return;
    }
    if (strcmp(w->versions[index], j->version) != 0) {
        refuse(l, j, PK_WIRE_MISSING_PROBLEM,
               "worker %s has problem '%s' at version %s, the server's is %s (its meta.json or "
               "problem.cu differ: deploy the same pkgym tree on every node)",
               w->name, j->problem, w->versions[index], j->version);
        return;
    }
    if (!pk_problem_module_present(p, why, sizeof why)) {
        refuse(l, j, PK_WIRE_MISSING_PROBLEM, "worker %s lacks the module of problem '%s': %s",
               w->name, j->problem, why);
        return;
    }
    remote_job *rj = calloc(1, sizeof *rj);
    if (!rj) {
        refuse(l, j, PK_WIRE_REFUSED, "worker %s: out of memory", w->name);
        return;
    }
    pk_eval_opts opts = j->opts;
    int gpu = pk_problem_needs_gpu(p);
    /* The broker's cached reference time is used only for the hardware it was measured on. */
    const char *device = gpu ? w->host.gpu_model : w->host.cpu_model;
    const char *driver = gpu ? w->host.driver : "host";
    if (!(j->baseline.us > 0 && strcmp(j->baseline.device, device) == 0 &&
          strcmp(j->baseline.driver, driver) == 0 && strcmp(j->baseline.nccl, w->host.nccl) == 0))
        opts.baseline_us = 0;
    *rj = (remote_job){.id = j->id,
                       .attempt = j->attempt,
                       .session = l->session,
                       .t_arrive_ms = pk_now_ms(),
                       .world = opts.world_size > 0 ? opts.world_size : pk_problem_world_size(p),
                       .needs_gpu = gpu,
                       .report_baseline = !opts.skip_timing && !opts.reference_as_candidate};
    pk_error err;
    pk_error_clear(&err);
    uint64_t ticket;
    int rc = pk_scheduler_submit(l->sched, p, j->source, &opts, rj, &ticket, &err);
    if (rc) {
        free(rj);
        refuse(l, j,
               rc == PK_ERR_OVERLOADED || rc == PK_ERR_BUSY ? PK_WIRE_REFUSED
               : rc == PK_ERR_UNSUPPORTED                   ? PK_WIRE_BAD_JOB
                                                            : PK_WIRE_HARNESS_ERROR,
               "worker %s: %s", w->name, err.message);
        return;
    }
    l->in_flight++;
}

/* Handles one message from the broker; -1 when none is waiting. */
static int on_message(worker_loop *l, volatile sig_atomic_t *stop) {
    zmq_msg_t m;
    zmq_msg_init(&m);
    if (!l->sock || zmq_msg_recv(&m, l->sock, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&m);
        return -1;
    }
    l->last_recv_ms = pk_now_ms();
    l->backoff_ms = l->w->o.heartbeat_ms;
    msgpack_unpacked u;
    int type;
    pk_error err;
    if (pk_wire_decode(zmq_msg_data(&m), zmq_msg_size(&m), &u, &type, &err) != PK_OK) {
        say(l, "ignored a message from the broker: %s", err.message);
    } else if (type == PK_WIRE_JOB) {
        pk_wire_job j;
        if (pk_wire_unpack_job(&u.data, &j, &err) == PK_OK) {
            submit_job(l, &j);
            pk_wire_job_free(&j);
        } else {
            uint64_t id = 0;
            int attempt = 0;
            pk_wire_job bad = {0};
            if (pk_mp_get_u64(&u.data, "id", &id) == 0 && id &&
                pk_mp_get_int(&u.data, "attempt", &attempt) == 0) {
                bad.id = id;
                bad.attempt = attempt;
                refuse(l, &bad, PK_WIRE_BAD_JOB, "worker %s: %s", l->w->name, err.message);
            }
        }
    } else if (type == PK_WIRE_BYE) {
        msgpack_unpacked_destroy(&u);
        zmq_msg_close(&m);
        l->backoff_ms = l->w->o.heartbeat_ms;
        reconnect(l, stop, "the broker does not know this session");
        return 0;
    }
    msgpack_unpacked_destroy(&u);
    zmq_msg_close(&m);
    return 0;
}

static void on_completion(worker_loop *l, pk_completion *c) {
    remote_job *rj = c->user;
    if (rj->session != l->session || !l->sock) {
        l->stale++; /* its session is over: the broker has given the job to another worker */
    } else {
        l->in_flight--;
        l->done++;
        pk_wire_result r;
        memset(&r, 0, sizeof r);
        r.id = rj->id;
        r.attempt = rj->attempt;
        if (c->harness_rc == PK_ERR_INFRA) {
            /* Ours, retried here already: the broker and the server answer infra_error. */
            c->harness_rc = 0;
            c->result.status = PK_STATUS_INFRA_ERROR;
            snprintf(c->result.reason, sizeof c->result.reason, "%s", c->error.message);
        }
        r.code = c->harness_rc ? PK_WIRE_HARNESS_ERROR : PK_WIRE_OK;
        snprintf(r.message, sizeof r.message, "%s", c->harness_rc ? c->error.message : "");
        r.result = c->result; /* borrowed: freed with c */
        r.worker_ms = pk_now_ms() - rj->t_arrive_ms;
        if (!c->harness_rc && rj->report_baseline && c->result.has_timing &&
            c->result.reference.median_us > 0) {
            const pk_host_info *h = &l->w->host;
            snprintf(r.baseline.device, sizeof r.baseline.device, "%s",
                     rj->needs_gpu ? h->gpu_model : h->cpu_model);
            snprintf(r.baseline.driver, sizeof r.baseline.driver, "%s",
                     rj->needs_gpu ? h->driver : "host");
            snprintf(r.baseline.nccl, sizeof r.baseline.nccl, "%s", h->nccl);
            r.baseline.world = rj->world;
            r.baseline.us = c->result.reference.median_us;
        }
        send_result(l, &r);
    }
    free(rj);
    pk_completion_free(c);
}

static int take_completions(worker_loop *l) {
    int n = 0;
    for (;;) {
        pk_completion *c = NULL;
        int got = zmq_recv(l->done_pull, &c, sizeof c, ZMQ_DONTWAIT);
        if (got < 0)
            return n;
        if (got == (int)sizeof c && c) {
            on_completion(l, c);
            n++;
        }
    }
}

static void nap(worker_loop *l, int ms, volatile sig_atomic_t *stop) {
    double until = pk_now_ms() + ms;
    while (!*stop && pk_now_ms() < until) {
        zmq_pollitem_t it = {l->done_pull, 0, ZMQ_POLLIN, 0};
        double left = until - pk_now_ms();
        zmq_poll(&it, 1, left > 100 ? 100 : (long)(left > 0 ? left : 0));
        take_completions(l);
    }
}

static int start(worker_loop *l, pk_error *err) {
    pk_worker_ctx *w = l->w;
    l->zctx = w->o.zmq_ctx;
    if (!l->zctx) {
        l->zctx = zmq_ctx_new();
        l->own_ctx = 1;
    }
    if (!l->zctx)
        return pk_error_set(err, PK_ERR_SYSTEM, "zmq_ctx_new: %s", zmq_strerror(zmq_errno()));
    snprintf(l->done_ep, sizeof l->done_ep, "inproc://pkgym-worker-done-%p", (void *)l);
    int zero = 0;
    l->done_pull = zmq_socket(l->zctx, ZMQ_PULL);
    if (!l->done_pull || zmq_setsockopt(l->done_pull, ZMQ_RCVHWM, &zero, sizeof zero) ||
        zmq_bind(l->done_pull, l->done_ep) != 0)
        return pk_error_set(err, PK_ERR_SYSTEM, "bind %s: %s", l->done_ep,
                            zmq_strerror(zmq_errno()));
    pk_scheduler_opts so;
    memset(&so, 0, sizeof so);
    so.zmq_ctx = l->zctx;
    so.done_endpoint = l->done_ep;
    so.compile_workers = w->compile_workers;
    so.run_host_slots = w->host_slots;
    so.n_gpus = w->n_gpus;
    memcpy(so.gpus, w->gpus, (size_t)w->n_gpus * sizeof *w->gpus);
    /* Jobs of an abandoned session may still run: room for them too. */
    so.queue_limit = 3 * w->max_jobs + 16;
    char *cache = pk_path_join(w->data_dir, "cache");
    so.cache_dir = cache;
    int rc = cache ? pk_mkdir_p(cache, err) : pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    if (!rc)
        rc = pk_scheduler_create(&so, &l->sched, err);
    free(cache);
    return rc;
}

static void stop_all(worker_loop *l) {
    if (l->sched) {
        pk_scheduler_shutdown(l->sched, 0);
        take_completions(l); /* cancelled jobs: dropped with their session */
    }
    close_session(l);
    if (l->sched)
        pk_scheduler_free(l->sched);
    if (l->done_pull)
        zmq_close(l->done_pull);
    if (l->own_ctx && l->zctx)
        zmq_ctx_term(l->zctx);
}

static void log_start(const worker_loop *l) {
    const pk_worker_ctx *w = l->w;
    char gpus[256] = "";
    size_t used = 0;
    for (int i = 0; i < w->n_gpus && used < sizeof gpus - 8; i++)
        used += (size_t)snprintf(gpus + used, sizeof gpus - used, "%s%d", i ? "," : "", w->gpus[i]);
    say(l,
        "%s launch (rank %d, local %d/%d); GPUs [%s] %s, largest NVLink domain %d (%s); "
        "%d compile worker(s), %d host slot(s), up to %d jobs; %zu problem(s); broker %s",
        w->launch.kind, w->launch.rank, w->launch.local_rank, w->launch.local_size, gpus,
        w->n_gpus ? w->host.gpu_model : "", w->max_world, w->topo.source, w->compile_workers,
        w->host_slots, w->max_jobs, pk_problem_set_count(w->problems), w->o.connect);
    if (w->gpu_note[0])
        say(l, "%s", w->gpu_note);
    if (w->o.curve)
        say(l, "CURVE: this worker's key %s, the server's %s", w->o.curve->client.public_key,
            w->o.curve->server_public);
}

int pk_worker_run(const pk_worker_opts *o, volatile sig_atomic_t *stop, pk_error *err) {
    if (!o->connect)
        return pk_error_set(err, PK_ERR_INVALID, "the worker needs a broker endpoint (--connect)");
    pk_worker_ctx w;
    worker_loop l;
    memset(&l, 0, sizeof l);
    l.w = &w;
    int rc = pk_worker_ctx_init(&w, o, err);
    if (!rc)
        rc = start(&l, err);
    if (rc) {
        stop_all(&l);
        pk_worker_ctx_free(&w);
        return rc;
    }
    if (o->unblock_stop_signals) {
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGINT);
        sigaddset(&set, SIGTERM);
        pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    }
    log_start(&l);
    l.backoff_ms = w.o.heartbeat_ms;
    open_session(&l);
    double drain_deadline = 0;
    for (;;) {
        double now = pk_now_ms();
        if (*stop && !l.draining) {
            l.draining = 1;
            drain_deadline = now + w.o.grace_ms;
            send_simple(&l, PK_WIRE_DRAIN);
            say(&l, "stopping: %d job(s) in flight, grace %d ms", l.in_flight, w.o.grace_ms);
        }
        if (l.draining && (l.in_flight <= 0 || now >= drain_deadline || !l.sock))
            break;
        double wait = w.o.heartbeat_ms - (now - l.last_send_ms);
        zmq_pollitem_t items[3] = {{l.done_pull, 0, ZMQ_POLLIN, 0},
                                   {l.sock, 0, ZMQ_POLLIN, 0},
                                   {l.handshakes.pair, 0, ZMQ_POLLIN, 0}};
        int n_items = !l.sock ? 1 : l.handshakes.pair ? 3 : 2;
        if (zmq_poll(items, n_items,
                     wait < 1     ? 1
                     : wait > 250 ? 250
                                  : (long)wait) < 0 &&
            zmq_errno() != EINTR)
            break;
        take_completions(&l);
        read_handshakes(&l);
        if (l.fatal)
            break;
        for (int i = 0; i < 256 && n_items >= 2 && (items[1].revents & ZMQ_POLLIN); i++)
            if (on_message(&l, stop) < 0)
                break;
        now = pk_now_ms();
        if (!l.sock) {
            if (!*stop)
                open_session(&l);
            continue;
        }
        if (now - l.last_send_ms >= w.o.heartbeat_ms)
            send_heartbeat(&l);
        if (now - l.last_recv_ms > (double)w.o.heartbeat_ms * w.o.liveness && !l.draining)
            reconnect(&l, stop, "no heartbeat from the broker");
    }
    if (l.sock && !l.fatal) {
        int linger = 1000; /* let the bye leave before the socket closes */
        zmq_setsockopt(l.sock, ZMQ_LINGER, &linger, sizeof linger);
        send_simple(&l, PK_WIRE_BYE);
    }
    if (!l.fatal) /* else the caller reports fatal_err */
        say(&l, "stopped: %llu job(s) done, %llu stale result(s) dropped",
            (unsigned long long)l.done, (unsigned long long)l.stale);
    stop_all(&l);
    pk_worker_ctx_free(&w);
    if (l.fatal)
        return pk_error_set(err, l.fatal_err.code, "%s", l.fatal_err.message);
    return PK_OK;
}
