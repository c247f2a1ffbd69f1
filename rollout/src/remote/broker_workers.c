/* The broker's workers: sessions (ready, bye), heartbeats both ways, expiry, and their
 * description for `stats` (pk_broker_internal.h). Called on the broker's thread under mu. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zmq.h>

#include "pk_broker_internal.h"
#include "pk_client.h"
#include "pk_mp.h"

static void log_line(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void log_line(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "pkgym serve: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}

pk_bworker *pk_broker_find_worker(pk_broker *b, const void *id, size_t id_len) {
    for (pk_bworker *w = b->workers; w; w = w->next)
        if (w->id_len == id_len && memcmp(w->identity, id, id_len) == 0)
            return w;
    return NULL;
}

static int send_to(pk_broker *b, const void *id, size_t id_len, const msgpack_sbuffer *sb) {
    /* The front's ids (first byte 0x80 and up) are not of the forms the ROUTER's peers get (the
     * ZAP handler's start with 0x01), and a peer gone from the front fails like on the ROUTER
     * with ZMQ_ROUTER_MANDATORY. */
    if (pk_zmtp_front_has_peer(b->front, id, id_len)) {
        const void *frames[1] = {sb->data};
        size_t lens[1] = {sb->size};
        return pk_zmtp_front_send(b->front, id, id_len, frames, lens, 1) == 0 ? 0 : -1;
    }
    if (zmq_send(b->router, id, id_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
        return -1; /* EHOSTUNREACH: no such peer connected (ZMQ_ROUTER_MANDATORY) */
    return zmq_send(b->router, sb->data, sb->size, ZMQ_DONTWAIT) < 0 ? -1 : 0;
}

int pk_broker_send(pk_broker *b, pk_bworker *w, const msgpack_sbuffer *sb) {
    if (send_to(b, w->identity, w->id_len, sb) != 0)
        return -1;
    w->last_send_ms = pk_now_ms();
    return 0;
}

static void send_simple_to(pk_broker *b, const void *id, size_t id_len, int type) {
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    if (pk_wire_pack_simple(&sb, type) == PK_OK)
        send_to(b, id, id_len, &sb);
    msgpack_sbuffer_destroy(&sb);
}

static int json_int(const json_t *o, const char *key, int dflt) {
    json_t *v = json_object_get(o, key);
    return json_is_integer(v) ? (int)json_integer_value(v) : dflt;
}

static void json_str(const json_t *o, const char *key, char *buf, size_t cap) {
    const char *v = json_string_value(json_object_get(o, key));
    snprintf(buf, cap, "%s", v ? v : "");
}

static void forget(pk_bworker *w) {
    json_decref(w->info);
    json_decref(w->problems);
    json_decref(w->load);
    free(w);
}

static void record_departure(pk_broker *b, const pk_bworker *w, const char *state, const char *why,
                             int jobs_lost) {
    json_t *d = pk_broker_worker_json(b, w, pk_now_ms());
    json_object_set_new(d, "state", json_string(state));
    json_object_set_new(d, "reason", json_string(why));
    json_object_set_new(d, "jobs_in_flight", json_integer(0));
    json_object_set_new(d, "jobs_lost", json_integer(jobs_lost));
    json_object_set_new(d, "departed_at", json_real(pk_wall_time_s()));
    json_array_append_new(b->departed, d);
    while (json_array_size(b->departed) > PK_BROKER_DEPARTED_KEPT)
        json_array_remove(b->departed, 0);
}

void pk_broker_remove_worker(pk_broker *b, pk_bworker *w, const char *state, const char *why) {
    for (pk_bworker **p = &b->workers; *p; p = &(*p)->next)
        if (*p == w) {
            *p = w->next;
            break;
        }
    int lost = w->jobs.n;
    char reason[256];
    snprintf(reason, sizeof reason, "worker %.150s %s", w->name, why);
    /* From the back, each to the front of the queue: they keep their order, ahead of all. */
    while (w->jobs.tail) {
        pk_bjob *j = w->jobs.tail;
        pk_bjob_list_remove(&w->jobs, j);
        j->worker = NULL;
        pk_broker_job_lost(b, j, reason);
    }
    if (strcmp(state, "lost") == 0)
        b->stats.workers_lost++;
    else
        b->stats.workers_left++;
    log_line("worker %s %s: %s; %d job(s) in flight %s", w->name, state, why, lost,
             lost ? "go back to the queue (or fail if this was their second worker)" : "");
    record_departure(b, w, state, why, lost);
    forget(w);
}

static void register_worker(pk_broker *b, const void *id, size_t id_len, const char *key,
                            const msgpack_object *msg) {
    json_t *info = NULL;
    pk_error err;
    if (id_len > sizeof((pk_bworker *)0)->identity ||
        pk_wire_unpack_ready(msg, &info, &err) != PK_OK) {
        log_line("refused a worker: %s",
                 id_len > sizeof((pk_bworker *)0)->identity ? "routing id too long" : err.message);
        send_simple_to(b, id, id_len, PK_WIRE_BYE);
        return;
    }
    pk_bworker *old = pk_broker_find_worker(b, id, id_len);
    if (old && strcmp(old->curve_key, key) != 0) {
        /* Another key cannot take over a session (its jobs and results). */
        log_line("ignored a ready for worker %s's session from another CURVE key", old->name);
        json_decref(info);
        return;
    }
    if (old)
        pk_broker_remove_worker(b, old, "left", "announced itself again");
    pk_bworker *w = calloc(1, sizeof *w);
    json_t *problems = json_object();
    if (!w || !problems) {
        free(w);
        json_decref(problems);
        json_decref(info);
        return;
    }
    size_t i;
    json_t *pv;
    json_array_foreach(json_object_get(info, "problems"), i, pv) {
        const char *pid = json_string_value(json_array_get(pv, 0));
        json_t *ver = json_array_get(pv, 1);
        if (pid && json_is_string(ver))
            json_object_set(problems, pid, ver);
    }
    json_t *cap = json_object_get(info, "capacity");
    json_t *hi = json_object_get(info, "host_info");
    w->uid = b->next_uid++;
    memcpy(w->identity, id, id_len);
    w->id_len = id_len;
    json_str(info, "name", w->name, sizeof w->name);
    snprintf(w->curve_key, sizeof w->curve_key, "%s", key);
    w->info = info;
    w->problems = problems;
    w->max_jobs = json_int(cap, "max_jobs", 1);
    w->max_world = json_int(cap, "max_world", 0);
    w->gpu_slots = json_int(cap, "gpu_slots", 0);
    w->host_slots = json_int(cap, "host_slots", 0);
    if (w->max_jobs < 1)
        w->max_jobs = 1;
    json_str(hi, "gpu_model", w->gpu_model, sizeof w->gpu_model);
    json_str(hi, "driver", w->driver, sizeof w->driver);
    json_str(hi, "nccl", w->nccl, sizeof w->nccl);
    json_str(hi, "cpu_model", w->cpu_model, sizeof w->cpu_model);
    w->joined_ms = w->last_recv_ms = pk_now_ms();
    w->next = b->workers;
    b->workers = w;
    b->stats.workers_joined++;
    log_line("worker %s joined: %d GPU(s)%s%s, largest NVLink domain %d, %d host slot(s), up "
             "to %d job(s), %zu problem(s)%s%s",
             w->name, w->gpu_slots, w->gpu_slots ? " " : "", w->gpu_slots ? w->gpu_model : "",
             w->max_world, w->host_slots, w->max_jobs, json_object_size(problems),
             *key ? "; CURVE key " : "", key);
    send_simple_to(b, id, id_len, PK_WIRE_HEARTBEAT); /* it knows at once that we are here */
    w->last_send_ms = pk_now_ms();
}

void pk_broker_on_message(pk_broker *b, const void *id, size_t id_len, const char *key,
                          const void *data, size_t len) {
    if (!key)
        key = "";
    msgpack_unpacked u;
    int type;
    pk_error err;
    if (pk_wire_decode(data, len, &u, &type, &err) != PK_OK) {
        pk_bworker *w = pk_broker_find_worker(b, id, id_len);
        log_line("ignored a message from worker %s: %s", w ? w->name : "(unknown)", err.message);
        msgpack_unpacked_destroy(&u);
        return;
    }
    pk_bworker *w = pk_broker_find_worker(b, id, id_len);
    if (type == PK_WIRE_READY) {
        register_worker(b, id, id_len, key, &u.data);
    } else if (w && strcmp(w->curve_key, key) != 0) {
        /* A routing id is chosen by the peer: a session answers only to the key that opened
         * it, so another authorized key cannot send its results or heartbeats. */
        log_line("ignored a message for worker %s's session from another CURVE key", w->name);
    } else if (!w) {
        /* A session this broker does not know: lost earlier (its jobs went to other
         * workers), or one of a broker that ran before a restart. Its results are
         * discarded and it is told to start a new session. */
        if (type == PK_WIRE_RESULT)
            b->stats.stale_results++;
        if (type != PK_WIRE_BYE)
            send_simple_to(b, id, id_len, PK_WIRE_BYE);
    } else {
        w->last_recv_ms = pk_now_ms();
        if (type == PK_WIRE_HEARTBEAT) {
            json_t *load = NULL;
            const msgpack_object *lo = pk_mp_get(&u.data, "load");
            if (lo && pk_json_from_msgpack(lo, "load", 4, &load, NULL) == PK_OK) {
                json_decref(w->load);
                w->load = load;
            }
        } else if (type == PK_WIRE_RESULT) {
            pk_broker_on_result(b, w, &u.data);
        } else if (type == PK_WIRE_DRAIN) {
            w->draining = 1;
            log_line("worker %s is draining (%d job(s) in flight)", w->name, w->jobs.n);
        } else if (type == PK_WIRE_BYE) {
            pk_broker_remove_worker(b, w, "left", "said bye");
        }
    }
    msgpack_unpacked_destroy(&u);
}

void pk_broker_heartbeat(pk_broker *b, double now) {
    double limit = (double)b->opts.heartbeat_ms * b->opts.liveness;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    pk_wire_pack_simple(&sb, PK_WIRE_HEARTBEAT);
    for (pk_bworker *w = b->workers, *next; w; w = next) {
        next = w->next;
        char why[128];
        if (now - w->last_recv_ms > limit) {
            snprintf(why, sizeof why, "stopped responding (no message for %.1f s)",
                     (now - w->last_recv_ms) / 1000.0);
            pk_broker_remove_worker(b, w, "lost", why);
        } else if (now - w->last_send_ms >= b->opts.heartbeat_ms &&
                   pk_broker_send(b, w, &sb) != 0) {
            pk_broker_remove_worker(b, w, "lost", "disconnected (unreachable)");
        }
    }
    msgpack_sbuffer_destroy(&sb);
}

int pk_broker_worker_can_run(const pk_bworker *w, const pk_bjob *j) {
    if (j->kind == PK_JOB_NOOP)
        return 1;
    const char *v = json_string_value(json_object_get(w->problems, pk_problem_id(j->problem)));
    if (!v || strcmp(v, j->version) != 0)
        return 0;
    return j->needs_gpu ? w->max_world >= j->world : w->host_slots > 0;
}

json_t *pk_broker_worker_json(const pk_broker *b, const pk_bworker *w, double now) {
    (void)b;
    const json_t *i = w->info;
    const char *state = w->draining                ? "draining"
                        : w->jobs.n >= w->max_jobs ? "full"
                        : w->jobs.n > 0            ? "busy"
                                                   : "idle";
    json_t *o = json_pack(
        "{s:s, s:O?, s:O?, s:O?, s:s, s:O?, s:O?, s:s, s:O?, s:O?, s:O?, s:i, "
        "s:I, s:I, s:f, s:f, s:O?}",
        "name", w->name, "host", json_object_get(i, "host"), "pid", json_object_get(i, "pid"),
        "launcher", json_object_get(i, "launcher"), "state", state, "gpus",
        json_object_get(i, "gpus"), "nvlink_domains", json_object_get(i, "nvlink_domains"),
        "gpu_model", w->gpu_slots ? w->gpu_model : "", "capacity", json_object_get(i, "capacity"),
        "missing", json_object_get(i, "missing"), "gpu_note", json_object_get(i, "gpu_note"),
        "jobs_in_flight", w->jobs.n, "jobs_done", (json_int_t)w->done, "jobs_lost",
        (json_int_t)w->lost_jobs, "last_seen_s_ago", (now - w->last_recv_ms) / 1000.0,
        "connected_s", (now - w->joined_ms) / 1000.0, "load", w->load);
    if (o) {
        json_object_set_new(o, "problems", json_integer((json_int_t)json_object_size(w->problems)));
        json_object_set_new(o, "curve_key",
                            w->curve_key[0] ? json_string(w->curve_key) : json_null());
    }
    return o;
}
