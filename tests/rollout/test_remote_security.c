/* Security of the worker endpoint (issue #19; rollout/src/remote/pk_remote_socket.h): a public
 * tcp:// worker endpoint needs CURVE or insecure; with CURVE the ZAP handler admits only the
 * keys of the workers' domain (not the clients'), every other handshake fails and is
 * classified (refused key, no CURVE, wrong server key) on both ends; the broker counts the
 * refusals, never registers a refused worker, and binds a session to the key that opened it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <zmq.h>

#include "pk_broker.h"
#include "pk_handshake_watch.h"
#include "pk_remote_socket.h"
#include "pk_wire.h"

typedef struct fixture {
    char dir[64];
    void *ctx;
    pk_curve_server *cs;
    pk_curve_keypair server, worker, worker2, other, client;
    int clean; /* the test ran to its end, so every socket is closed */
} fixture;

static void save_key(fixture *f, pk_curve_keypair *kp, const char *name) {
    char base[128];
    pk_error err;
    assert_int_equal(pk_curve_keypair_new(kp, &err), PK_OK);
    snprintf(base, sizeof base, "%s/%s", f->dir, name);
    assert_int_equal(pk_curve_keypair_save(kp, base, 0, &err), PK_OK);
}

/* dir/SUB/k.pub; "workers2" goes into dir/workers too, under another name. */
static void allow(fixture *f, const char *sub, const pk_curve_keypair *kp) {
    char path[160];
    pk_error err;
    int second = strcmp(sub, "workers2") == 0;
    snprintf(path, sizeof path, "%s/%s", f->dir, second ? "workers" : sub);
    assert_int_equal(pk_mkdir_p(path, &err), PK_OK);
    snprintf(path, sizeof path, "%s/%s/%s", f->dir, second ? "workers" : sub,
             second ? "k2.pub" : "k.pub");
    assert_int_equal(pk_write_file(path, kp->public_key, PK_CURVE_KEY_LEN, &err), PK_OK);
}

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    snprintf(f->dir, sizeof f->dir, "/tmp/pk-remote-security-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    f->ctx = zmq_ctx_new();
    save_key(f, &f->server, "server");
    save_key(f, &f->worker, "worker");
    save_key(f, &f->worker2, "worker2");
    save_key(f, &f->other, "other");
    save_key(f, &f->client, "client");
    allow(f, "workers", &f->worker);
    allow(f, "workers2", &f->worker2);
    allow(f, "clients", &f->client);
    char path[160];
    pk_error err;
    snprintf(path, sizeof path, "%s/server.key", f->dir);
    assert_int_equal(pk_curve_server_start(f->ctx, path, &f->cs, &err), PK_OK);
    snprintf(path, sizeof path, "%s/workers", f->dir);
    assert_int_equal(pk_curve_server_allow(f->cs, PK_BROKER_ZAP_DOMAIN, path, &err), PK_OK);
    snprintf(path, sizeof path, "%s/clients", f->dir);
    assert_int_equal(pk_curve_server_allow(f->cs, PK_CURVE_DOMAIN_CLIENTS, path, &err), PK_OK);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    if (!f->clean) {
        /* A failed assertion left sockets open and zmq_ctx_term would wait for them forever:
         * leave the context, so that cmocka reports the failure. */
        pk_rm_rf(f->dir);
        return 0;
    }
    pk_curve_server_stop(f->cs);
    zmq_ctx_term(f->ctx);
    pk_rm_rf(f->dir);
    free(f);
    return 0;
}

static void test_bind_rules(void **state) {
    fixture *f = *state;
    void *r = zmq_socket(f->ctx, ZMQ_ROUTER);
    pk_error err;
    char resolved[256];
    assert_int_equal(pk_remote_socket_setup(r, PK_REMOTE_BROKER, &err), PK_OK);
    assert_int_equal(
        pk_remote_bind(r, NULL, "tcp://0.0.0.0:*", NULL, 0, resolved, sizeof resolved, &err),
        PK_ERR_INVALID);
    assert_non_null(strstr(err.message, "--worker-curve-allow"));
    assert_non_null(strstr(err.message, "--insecure"));
    assert_int_equal(
        pk_remote_bind(r, NULL, "tcp://127.0.0.1:*", NULL, 0, resolved, sizeof resolved, &err),
        PK_OK);
    char ipc[128];
    snprintf(ipc, sizeof ipc, "ipc://%s/w.sock", f->dir);
    assert_int_equal(pk_remote_bind(r, NULL, ipc, NULL, 0, NULL, 0, &err), PK_OK);
    assert_int_equal(
        pk_remote_bind(r, NULL, "tcp://0.0.0.0:*", NULL, 1, resolved, sizeof resolved, &err),
        PK_OK); /* with the warning */
    assert_int_equal(
        pk_remote_bind(r, NULL, "tcp://0.0.0.0:*", f->cs, 0, resolved, sizeof resolved, &err),
        PK_OK);
    /* Issue 27, finding 2: ws:// and the rest under the same rule as tcp://. */
    assert_int_equal(pk_remote_bind(r, NULL, "ws://0.0.0.0:*", NULL, 0, NULL, 0, &err),
                     PK_ERR_INVALID);
    assert_non_null(strstr(err.message, "--worker-curve-allow"));
    assert_int_equal(pk_remote_bind(r, NULL, "udp://127.0.0.1:5555", NULL, 1, NULL, 0, &err),
                     PK_ERR_INVALID);
    assert_int_equal(pk_remote_bind(r, NULL, "nope://x", f->cs, 1, NULL, 0, &err), PK_ERR_INVALID);
    zmq_close(r);
    f->clean = 1;
}

/* A DEALER as a worker would open it: kp NULL for no CURVE; id NULL for ZeroMQ's. */
static void *dealer_id(fixture *f, const char *ep, const char *server_public,
                       const pk_curve_keypair *kp, pk_handshake_watch *w, const char *id) {
    void *d = zmq_socket(f->ctx, ZMQ_DEALER);
    pk_error err;
    assert_int_equal(pk_remote_socket_setup(d, PK_REMOTE_WORKER, &err), PK_OK);
    if (id)
        assert_int_equal(zmq_setsockopt(d, ZMQ_ROUTING_ID, id, strlen(id)), 0);
    assert_int_equal(pk_handshake_watch_start(w, f->ctx, d, &err), PK_OK);
    pk_curve_client_keys keys;
    if (kp) {
        snprintf(keys.server_public, sizeof keys.server_public, "%s", server_public);
        keys.client = *kp;
    }
    assert_int_equal(pk_remote_connect(d, ep, kp ? &keys : NULL, &err), PK_OK);
    return d;
}

static void *dealer(fixture *f, const char *ep, const char *server_public,
                    const pk_curve_keypair *kp, pk_handshake_watch *w) {
    return dealer_id(f, ep, server_public, kp, w, NULL);
}

/* The next failure (or success) the watch reports within 5 s. */
static pk_handshake_event next_event(pk_handshake_watch *w) {
    pk_handshake_event ev = {PK_HANDSHAKE_FAILED, 0xdead};
    zmq_pollitem_t it = {w->pair, 0, ZMQ_POLLIN, 0};
    for (int i = 0; i < 50; i++) {
        if (pk_handshake_watch_read(w, &ev) == 0)
            return ev;
        zmq_poll(&it, 1, 100);
    }
    fail_msg("no handshake event in 5 s");
    return ev;
}

/* Issue 27, finding 2: a keyless worker on a ws:// worker endpoint of a CURVE broker reaches
 * nothing (it was registered, and its verdicts scored); an allowed one does. */
static void test_ws_worker_needs_a_key(void **state) {
    fixture *f = *state;
    void *r = zmq_socket(f->ctx, ZMQ_ROUTER);
    pk_error err;
    char ep[256];
    assert_int_equal(pk_remote_socket_setup(r, PK_REMOTE_BROKER, &err), PK_OK);
    assert_int_equal(pk_remote_bind(r, NULL, "ws://127.0.0.1:*", f->cs, 0, ep, sizeof ep, &err),
                     PK_OK);
    zmq_pollitem_t it = {r, 0, ZMQ_POLLIN, 0};
    pk_handshake_watch dw;
    void *d = dealer(f, ep, NULL, NULL, &dw);
    assert_int_equal(zmq_send(d, "ready?", 6, 0), 6);
    assert_int_equal(zmq_poll(&it, 1, 500), 0);
    pk_handshake_watch_stop(&dw);
    zmq_close(d);
    d = dealer(f, ep, f->server.public_key, &f->worker, &dw);
    assert_int_equal(zmq_send(d, "ready?", 6, 0), 6);
    assert_int_equal(zmq_poll(&it, 1, 5000), 1);
    zmq_msg_t id, body;
    zmq_msg_init(&id);
    zmq_msg_init(&body);
    assert_true(zmq_msg_recv(&id, r, 0) >= 0 && zmq_msg_recv(&body, r, 0) == 6);
    assert_string_equal(zmq_msg_gets(&body, "User-Id"), f->worker.public_key);
    zmq_msg_close(&id);
    zmq_msg_close(&body);
    pk_handshake_watch_stop(&dw);
    zmq_close(d);
    zmq_close(r);
    f->clean = 1;
}

static void test_handshakes(void **state) {
    fixture *f = *state;
    void *r = zmq_socket(f->ctx, ZMQ_ROUTER);
    pk_error err;
    char ep[256];
    pk_handshake_watch rw;
    assert_int_equal(pk_remote_socket_setup(r, PK_REMOTE_BROKER, &err), PK_OK);
    assert_int_equal(pk_handshake_watch_start(&rw, f->ctx, r, &err), PK_OK);
    assert_int_equal(pk_remote_bind(r, NULL, "tcp://127.0.0.1:*", f->cs, 0, ep, sizeof ep, &err),
                     PK_OK);
    struct {
        const char *what;
        const char *server_public;
        const pk_curve_keypair *kp;
        pk_handshake_kind server_sees, worker_sees;
    } cases[] = {
        {"allowed", f->server.public_key, &f->worker, PK_HANDSHAKE_OK, PK_HANDSHAKE_OK},
        {"other key", f->server.public_key, &f->other, PK_HANDSHAKE_REFUSED, PK_HANDSHAKE_REFUSED},
        {"client key", f->server.public_key, &f->client, PK_HANDSHAKE_REFUSED,
         PK_HANDSHAKE_REFUSED},
        {"no CURVE", NULL, NULL, PK_HANDSHAKE_MECHANISM, PK_HANDSHAKE_MECHANISM},
        {"wrong server key", f->other.public_key, &f->worker, PK_HANDSHAKE_CRYPTOGRAPHIC,
         PK_HANDSHAKE_FAILED},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        pk_handshake_watch dw;
        void *d = dealer(f, ep, cases[i].server_public, cases[i].kp, &dw);
        assert_int_equal(zmq_send(d, "ready?", 6, 0), 6);
        pk_handshake_event se = next_event(&rw), de = next_event(&dw);
        print_message("%s: broker %d (%u), worker %d (%u)\n", cases[i].what, se.kind, se.value,
                      de.kind, de.value);
        assert_int_equal(se.kind, cases[i].server_sees);
        if (cases[i].worker_sees == PK_HANDSHAKE_MECHANISM && de.kind == PK_HANDSHAKE_FAILED)
            de = next_event(&dw); /* the dropped connection may be reported first */
        assert_int_equal(de.kind, cases[i].worker_sees);
        if (se.kind == PK_HANDSHAKE_REFUSED)
            assert_int_equal(se.value, 400);
        zmq_pollitem_t it = {r, 0, ZMQ_POLLIN, 0};
        if (cases[i].server_sees == PK_HANDSHAKE_OK) {
            /* The message arrives, with the key that authenticated it. */
            assert_int_equal(zmq_poll(&it, 1, 5000), 1);
            zmq_msg_t id, body;
            zmq_msg_init(&id);
            zmq_msg_init(&body);
            assert_true(zmq_msg_recv(&id, r, 0) >= 0 && zmq_msg_recv(&body, r, 0) == 6);
            assert_string_equal(zmq_msg_gets(&body, "User-Id"), f->worker.public_key);
            zmq_msg_close(&id);
            zmq_msg_close(&body);
        } else {
            assert_int_equal(zmq_poll(&it, 1, 300), 0); /* nothing of theirs got through */
        }
        pk_handshake_watch_stop(&dw);
        zmq_close(d);
        /* Drop what a retrying peer left (wrong server key: ZeroMQ retries). */
        pk_handshake_event extra;
        while (pk_handshake_watch_read(&rw, &extra) == 0)
            ;
    }
    char why[160];
    pk_handshake_event ev = {PK_HANDSHAKE_REFUSED, 400};
    assert_non_null(strstr(pk_handshake_describe(&ev, why, sizeof why), "400"));
    pk_handshake_watch_stop(&rw);
    zmq_close(r);
    f->clean = 1;
}

static void send_raw(void *d, const msgpack_sbuffer *sb) {
    assert_int_equal(zmq_send(d, sb->data, sb->size, 0), (int)sb->size);
}

static void send_ready(void *d, const char *name) {
    json_t *info =
        json_pack("{s:s, s:s, s:i, s:{s:i, s:i, s:i, s:i}, s:[], s:[], s:[], s:{}}", "name", name,
                  "host", "test", "pid", 1, "capacity", "max_jobs", 1, "gpu_slots", 0, "host_slots",
                  1, "max_world", 0, "problems", "gpus", "nvlink_domains", "host_info");
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    assert_int_equal(pk_wire_pack_ready(&sb, info), PK_OK);
    send_raw(d, &sb);
    msgpack_sbuffer_destroy(&sb);
    json_decref(info);
}

/* Waits until the broker has counted at least the given refusals and other failed handshakes
 * (each counted as its own event arrives: one read can see the first and not the second). */
static void wait_stats(pk_broker *b, pk_broker_stats *st, int workers, uint64_t refused,
                       uint64_t failed) {
    for (int i = 0; i < 100; i++) {
        pk_broker_get_stats(b, st);
        if (st->workers == workers && st->workers_refused >= refused &&
            st->handshakes_failed >= failed)
            return;
        usleep(50000);
    }
    fail_msg("broker stats: %d workers, %llu refused, %llu failed; wanted %d, %llu, %llu",
             st->workers, (unsigned long long)st->workers_refused,
             (unsigned long long)st->handshakes_failed, workers, (unsigned long long)refused,
             (unsigned long long)failed);
}

static void test_broker(void **state) {
    fixture *f = *state;
    void *pull = zmq_socket(f->ctx, ZMQ_PULL);
    assert_int_equal(zmq_bind(pull, "inproc://remote-security-done"), 0);
    /* A free port: picked by a throwaway context, whose term waits until it is released. */
    void *pctx = zmq_ctx_new(), *probe = zmq_socket(pctx, ZMQ_ROUTER);
    char ep[64];
    size_t len = sizeof ep;
    assert_int_equal(zmq_bind(probe, "tcp://127.0.0.1:*"), 0);
    assert_int_equal(zmq_getsockopt(probe, ZMQ_LAST_ENDPOINT, ep, &len), 0);
    zmq_close(probe);
    zmq_ctx_term(pctx);
    pk_broker_opts bo;
    memset(&bo, 0, sizeof bo);
    bo.zmq_ctx = f->ctx;
    bo.done_endpoint = "inproc://remote-security-done";
    bo.binds[0] = ep;
    bo.n_binds = 1;
    /* Long enough that the session of a closed connection is still known (not yet lost) when
     * another key speaks for it. */
    bo.heartbeat_ms = 5000;
    bo.curve = f->cs;
    pk_broker *b = NULL;
    pk_error err;
    assert_int_equal(pk_broker_create(&bo, &b, &err), PK_OK);
    pk_broker_stats st;
    pk_handshake_watch w1, w2, w3;
    memset(&w3, 0, sizeof w3);
    void *refused = dealer(f, ep, f->server.public_key, &f->other, &w1);
    void *plain = dealer(f, ep, NULL, NULL, &w2);
    send_ready(refused, "intruder");
    send_ready(plain, "plain");
    wait_stats(b, &st, 0, 1, 1);
    assert_true(st.curve && st.handshakes_failed >= 1 && st.workers_joined == 0);
    /* The allowed key joins. */
    void *good = dealer_id(f, ep, f->server.public_key, &f->worker, &w3, "good#1");
    send_ready(good, "good");
    wait_stats(b, &st, 1, 1, 0);
    json_t *workers = pk_broker_workers_json(b);
    assert_int_equal(json_array_size(workers), 1);
    json_t *w = json_array_get(workers, 0);
    assert_string_equal(json_string_value(json_object_get(w, "name")), "good");
    assert_string_equal(json_string_value(json_object_get(w, "curve_key")), f->worker.public_key);
    json_decref(workers);
    /* Its connection goes; another allowed key takes its routing id before the broker counts
     * the session lost: its ready is ignored and the session stays "good"'s, until lost. */
    pk_handshake_watch_stop(&w3);
    zmq_close(good);
    usleep(50000);
    pk_handshake_watch w4;
    void *evil = dealer_id(f, ep, f->server.public_key, &f->worker2, &w4, "good#1");
    send_ready(evil, "evil");
    usleep(200000);
    workers = pk_broker_workers_json(b);
    int evil_seen = 0;
    for (size_t i = 0; i < json_array_size(workers); i++)
        evil_seen |= strcmp(json_string_value(json_object_get(json_array_get(workers, i), "name")),
                            "evil") == 0;
    json_decref(workers);
    pk_broker_get_stats(b, &st);
    assert_false(evil_seen);
    assert_int_equal(st.workers_joined, 1);
    pk_handshake_watch *ws[] = {&w1, &w2, &w4};
    void *ds[] = {refused, plain, evil};
    for (int i = 0; i < 3; i++) {
        pk_handshake_watch_stop(ws[i]);
        zmq_close(ds[i]);
    }
    pk_broker_free(b);
    zmq_close(pull);
    f->clean = 1;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_ws_worker_needs_a_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bind_rules, setup, teardown),
        cmocka_unit_test_setup_teardown(test_handshakes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_broker, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
