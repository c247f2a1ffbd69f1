/* pk_zmtp_front (issue 27, finding 1) against real libzmq clients, on tcp:// and ipc://: DEALER
 * and REQ peers, with and without ZMQ_ROUTING_ID, are served and named by the server; peers
 * that claim every id libzmq would generate next change nothing; other socket types, oversized
 * messages and raw junk are closed; heartbeats are answered; connection events come in order. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>
#include <zmq.h>

#include "pk_zmtp_front.h"

#define MAX_MESSAGE 4096
#define WAIT_MS 10000 /* generous: the machine may be loaded; a pass never waits this long */

static void *ctx;
static pk_zmtp_front *front;
static char dir[64];
static char endpoints[2][256]; /* tcp, ipc */
static int open_clients;       /* a failed test leaves some: the context is then not terminated */

static int setup(void **state) {
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/pk-test-zmtp-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    ctx = zmq_ctx_new();
    pk_error err;
    if (pk_zmtp_front_new(ctx, MAX_MESSAGE, &front, &err) != PK_OK)
        return -1;
    void *s = pk_zmtp_front_socket(front);
    char ipc[128];
    snprintf(ipc, sizeof ipc, "ipc://%s/front", dir);
    if (zmq_bind(s, "tcp://127.0.0.1:*") != 0)
        return -1;
    size_t n = sizeof endpoints[0];
    zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, endpoints[0], &n);
    if (zmq_bind(s, ipc) != 0)
        return -1;
    snprintf(endpoints[1], sizeof endpoints[1], "%s", ipc);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    pk_zmtp_front_free(front);
    if (open_clients == 0) /* else zmq_ctx_term would wait for them forever */
        zmq_ctx_term(ctx);
    char path[128];
    snprintf(path, sizeof path, "%s/front", dir);
    unlink(path);
    rmdir(dir);
    return 0;
}

/* The server's side: every whole message is echoed to its peer; the peer ids seen are kept. */
typedef struct seen {
    uint8_t ids[512][PK_ZMTP_PEER_ID_LEN];
    int n;
} seen;

static uint32_t last_conn; /* the connection of the last message served */

static int serve_one(seen *s) {
    zmq_msg_t parts[PK_ZMTP_FRONT_MAX_PARTS + 1];
    const void *data[PK_ZMTP_FRONT_MAX_PARTS + 1];
    size_t lens[PK_ZMTP_FRONT_MAX_PARTS + 1];
    int n = 0, more = 1;
    uint32_t conn;
    while (more) {
        zmq_msg_init(&parts[n]);
        if (pk_zmtp_front_recv(front, &parts[n], &more, &conn) != 0) {
            zmq_msg_close(&parts[n]);
            assert_int_equal(n, 0); /* a message comes whole or not at all */
            return 0;
        }
        data[n] = zmq_msg_data(&parts[n]);
        lens[n] = zmq_msg_size(&parts[n]);
        n++;
        assert_true(n <= PK_ZMTP_FRONT_MAX_PARTS + 1);
    }
    last_conn = conn;
    assert_int_equal(lens[0], PK_ZMTP_PEER_ID_LEN);
    assert_true(pk_zmtp_front_has_peer(front, data[0], lens[0]));
    const uint8_t *id = data[0];
    assert_int_not_equal(id[0], 0x00); /* never the form libzmq generates */
    if (s && s->n < 512)
        memcpy(s->ids[s->n++], id, PK_ZMTP_PEER_ID_LEN);
    assert_int_equal(pk_zmtp_front_send(front, data[0], lens[0], data + 1, lens + 1, n - 1), 0);
    for (int i = 0; i < n; i++)
        zmq_msg_close(&parts[i]);
    return 1;
}

/* Runs the server's side until reply arrives on client (a whole message); returns its frames. */
static int serve_until(void *client, zmq_msg_t *reply, int max_parts, seen *s) {
    for (int waited = 0; waited < WAIT_MS; waited += 5) {
        zmq_pollitem_t it[2] = {{pk_zmtp_front_socket(front), 0, ZMQ_POLLIN, 0},
                                {client, 0, ZMQ_POLLIN, 0}};
        zmq_poll(it, 2, pk_zmtp_front_pending(front) ? 0 : 5);
        while (serve_one(s))
            ;
        pk_zmtp_front_tick(front);
        if (zmq_poll(&it[1], 1, 0) > 0) {
            int n = 0;
            do {
                assert_true(n < max_parts);
                zmq_msg_init(&reply[n]);
                assert_true(zmq_msg_recv(&reply[n], client, 0) >= 0);
            } while (zmq_msg_more(&reply[n++]));
            return n;
        }
    }
    return -1;
}

static void close_client(void *c) {
    zmq_close(c);
    open_clients--;
}

static void *client_socket(int type, const void *id, size_t id_len, const char *endpoint) {
    void *c = zmq_socket(ctx, type);
    open_clients++;
    int zero = 0;
    zmq_setsockopt(c, ZMQ_LINGER, &zero, sizeof zero);
    if (id)
        zmq_setsockopt(c, ZMQ_ROUTING_ID, id, id_len);
    assert_int_equal(zmq_connect(c, endpoint), 0);
    return c;
}

/* A request and its echo: the body comes back whole, to this client only. */
static void request(void *c, int type, const char *body, seen *s) {
    assert_true(zmq_send(c, body, strlen(body), 0) >= 0);
    zmq_msg_t reply[4];
    int n = serve_until(c, reply, 4, s);
    (void)type; /* a REQ takes its delimiter off: one frame either way */
    assert_int_equal(n, 1);
    assert_int_equal(zmq_msg_size(&reply[0]), strlen(body));
    assert_memory_equal(zmq_msg_data(&reply[0]), body, strlen(body));
    for (int i = 0; i < n; i++)
        zmq_msg_close(&reply[i]);
}

/* DEALER and REQ, anonymous and with ids of their own (libzmq's generated form among them):
 * every one is served and gets an id of the server's, the same for all its requests. */
static void test_dealer_and_req(void **state) {
    (void)state;
    static const char *const ids[] = {NULL, "\0\0\0\0\1", "mine", "\0\0\0\0\1"};
    static const size_t id_lens[] = {0, 5, 4, 5};
    for (int e = 0; e < 2; e++) {
        for (int t = 0; t < 2; t++) {
            int type = t ? ZMQ_REQ : ZMQ_DEALER;
            void *c[4];
            seen s = {.n = 0};
            for (int i = 0; i < 4; i++)
                c[i] = client_socket(type, ids[i], id_lens[i], endpoints[e]);
            for (int round = 0; round < 2; round++)
                for (int i = 0; i < 4; i++)
                    request(c[i], type, round ? "again" : "hello", &s);
            assert_int_equal(s.n, 8);
            for (int i = 0; i < 4; i++) {
                assert_memory_equal(s.ids[i], s.ids[4 + i], PK_ZMTP_PEER_ID_LEN);
                for (int j = 0; j < i; j++)
                    assert_memory_not_equal(s.ids[i], s.ids[j], PK_ZMTP_PEER_ID_LEN);
            }
            for (int i = 0; i < 4; i++)
                close_client(c[i]);
        }
    }
}

/* The attack of finding 1, made as strong as a client can: peers holding 0x00+N for many N
 * around where libzmq's counter would be (and the same id twice), then many anonymous peers,
 * DEALER and REQ: everyone is answered, each under a distinct server-chosen id. */
static void test_next_counter_attack(void **state) {
    (void)state;
    enum { HOLDERS = 48, ANONYMOUS = 48 };
    for (int e = 0; e < 2; e++) {
        void *held[HOLDERS];
        seen s = {.n = 0};
        for (int i = 0; i < HOLDERS; i++) {
            uint8_t id[5] = {0, 0, 0, 0, (uint8_t)(i / 2)}; /* two peers per id */
            held[i] = client_socket(ZMQ_DEALER, id, sizeof id, endpoints[e]);
            request(held[i], ZMQ_DEALER, "claim", &s);
        }
        for (int i = 0; i < ANONYMOUS; i++) {
            int type = i % 2 ? ZMQ_REQ : ZMQ_DEALER;
            void *c = client_socket(type, NULL, 0, endpoints[e]);
            request(c, type, "anonymous", &s);
            close_client(c);
        }
        for (int i = 0; i < HOLDERS; i++) /* the holders are still served too */
            request(held[i], ZMQ_DEALER, "still", &s);
        assert_int_equal(s.n, HOLDERS * 2 + ANONYMOUS);
        for (int i = 0; i < HOLDERS + ANONYMOUS; i++)
            for (int j = 0; j < i; j++)
                assert_memory_not_equal(s.ids[i], s.ids[j], PK_ZMTP_PEER_ID_LEN);
        for (int i = 0; i < HOLDERS; i++)
            close_client(held[i]);
    }
}

static void pump(int ms) {
    zmq_pollitem_t it = {pk_zmtp_front_socket(front), 0, ZMQ_POLLIN, 0};
    zmq_poll(&it, 1, pk_zmtp_front_pending(front) ? 0 : ms);
    while (serve_one(NULL))
        ;
    pk_zmtp_front_tick(front);
}

/* A raw connection to the ipc endpoint: what it writes, then everything the server sends until
 * it closes the connection (the test fails if it does not). */
static size_t raw_session(const void *bytes, size_t len, uint8_t *got, size_t cap) {
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s/front", dir);
    assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(write(fd, bytes, len), (ssize_t)len);
    size_t n = 0;
    int eof = 0;
    for (int waited = 0; waited < WAIT_MS && !eof; waited += 5) {
        pump(5);
        for (;;) {
            ssize_t r = recv(fd, got + n, cap - n, MSG_DONTWAIT);
            if (r == 0)
                eof = 1;
            if (r <= 0)
                break;
            n += (size_t)r;
            assert_true(n < cap);
        }
    }
    close(fd);
    assert_true(eof);
    return n;
}

static size_t client_hello(uint8_t *b, const char *type) {
    static const uint8_t g[64] = {0xFF, 0, 0, 0, 0, 0, 0, 0, 1, 0x7F, 3, 1, 'N', 'U', 'L', 'L'};
    memcpy(b, g, 64);
    size_t tl = strlen(type), n = 64;
    b[n++] = 0x04;
    b[n++] = (uint8_t)(1 + 5 + 1 + 11 + 4 + tl);
    b[n++] = 5;
    memcpy(b + n, "READY", 5);
    n += 5;
    b[n++] = 11;
    memcpy(b + n, "Socket-Type", 11);
    n += 11;
    b[n++] = 0;
    b[n++] = 0;
    b[n++] = 0;
    b[n++] = (uint8_t)tl;
    memcpy(b + n, type, tl);
    return n + tl;
}

static int has(const uint8_t *b, size_t n, const char *s) {
    return memmem(b, n, s, strlen(s)) != NULL;
}

/* What is not served is closed: another socket type (an ERROR naming DEALER and REQ first), a
 * message over the limit (its header is enough), bytes that are not ZMTP 3; a real libzmq PUB
 * is refused. Others are served meanwhile. */
static void test_refusals(void **state) {
    (void)state;
    uint8_t out[256], got[4096];
    size_t n = client_hello(out, "PUB");
    size_t g = raw_session(out, n, got, sizeof got);
    assert_true(g >= 64);
    assert_int_equal(got[0], 0xFF);
    assert_true(has(got, g, "ERROR"));
    assert_true(has(got, g, "DEALER or REQ"));
    assert_false(has(got, g, "READY"));

    n = client_hello(out, "DEALER");
    uint8_t header[9] = {0x02, 0, 0, 0, 0, 0, 0, (MAX_MESSAGE + 1) >> 8, (MAX_MESSAGE + 1) & 0xFF};
    memcpy(out + n, header, sizeof header);
    g = raw_session(out, n + sizeof header, got, sizeof got);
    assert_true(has(got, g, "READY"));
    assert_true(has(got, g, "ROUTER"));
    assert_true(has(got, g, "larger than"));

    g = raw_session("GET / HTTP/1.1\r\n\r\n", 18, got, sizeof got);
    assert_true(g <= 64); /* at most the greeting, sent before the junk arrived */

    /* A peer that sends half a greeting and then nothing is closed after the handshake
     * time, as libzmq's ZMQ_HANDSHAKE_IVL would close it. */
    pk_zmtp_front_set_handshake_ms(front, 300);
    g = raw_session(out, 20, got, sizeof got);
    assert_int_equal(g, 64); /* the greeting, no READY */
    pk_zmtp_front_set_handshake_ms(front, 30000);

    uint64_t refused = pk_zmtp_front_get_counts(front).refused;
    void *pub = client_socket(ZMQ_PUB, NULL, 0, endpoints[0]);
    for (int waited = 0; waited < WAIT_MS && pk_zmtp_front_get_counts(front).refused == refused;
         waited += 5)
        pump(5);
    assert_true(pk_zmtp_front_get_counts(front).refused > refused);
    close_client(pub);

    void *ok = client_socket(ZMQ_DEALER, NULL, 0, endpoints[0]);
    static char at_limit[MAX_MESSAGE + 1];
    memset(at_limit, 'a', MAX_MESSAGE);
    request(ok, ZMQ_DEALER, at_limit, NULL); /* MAX_MESSAGE bytes: served */
    close_client(ok);
}

/* Connection events of one connection (by its slot), from its open on. */
static void track(uint32_t slot, int *opened, int *closed) {
    pk_zmtp_conn_event ev;
    while (pk_zmtp_front_next_event(front, &ev)) {
        if (ev.conn != slot)
            continue;
        if (ev.open)
            ++*opened;
        else if (*opened)
            ++*closed;
    }
}

/* ZMTP 3.1 heartbeats: a client that would time out without PONGs keeps its one connection;
 * its open and its close are reported. */
static void test_heartbeats(void **state) {
    (void)state;
    pk_zmtp_conn_event ev;
    while (pk_zmtp_front_next_event(front, &ev))
        ;
    uint64_t accepted = pk_zmtp_front_get_counts(front).accepted;
    void *c = zmq_socket(ctx, ZMQ_DEALER);
    open_clients++;
    int ivl = 20, timeout = 150, zero = 0;
    zmq_setsockopt(c, ZMQ_HEARTBEAT_IVL, &ivl, sizeof ivl);
    zmq_setsockopt(c, ZMQ_HEARTBEAT_TIMEOUT, &timeout, sizeof timeout);
    zmq_setsockopt(c, ZMQ_LINGER, &zero, sizeof zero);
    assert_int_equal(zmq_connect(c, endpoints[0]), 0);
    request(c, ZMQ_DEALER, "hb", NULL);
    uint32_t slot = last_conn;
    int opened = 0, closed = 0;
    for (int waited = 0; waited < 1000; waited += 5) { /* several heartbeat timeouts */
        pump(5);
        track(slot, &opened, &closed);
    }
    request(c, ZMQ_DEALER, "hb2", NULL);
    assert_int_equal(last_conn, slot);
    assert_int_equal(pk_zmtp_front_get_counts(front).accepted, accepted + 1);
    track(slot, &opened, &closed);
    assert_int_equal(opened, 1);
    assert_int_equal(closed, 0);
    close_client(c);
    for (int waited = 0; waited < WAIT_MS && closed == 0; waited += 5) {
        pump(5);
        track(slot, &opened, &closed);
    }
    assert_int_equal(closed, 1);
}

/* More connections open at once than the front's first index has buckets (256): each is served
 * under its own id, however many share a bucket chain or moved with the index. */
static void test_many_connections(void **state) {
    (void)state;
    enum { N = 300 };
    static void *c[N];
    static seen s;
    s.n = 0;
    for (int i = 0; i < N; i++)
        c[i] = client_socket(ZMQ_DEALER, NULL, 0, endpoints[i % 2]);
    for (int i = 0; i < N; i++)
        request(c[i], ZMQ_DEALER, "many", &s);
    assert_true(pk_zmtp_front_connections(front) >= N);
    for (int i = 0; i < N; i++) /* the first ones again: found after the index grew */
        request(c[i], ZMQ_DEALER, "again", NULL);
    assert_int_equal(s.n, N);
    for (int i = 0; i < N; i++)
        for (int j = 0; j < i; j++)
            assert_memory_not_equal(s.ids[i], s.ids[j], PK_ZMTP_PEER_ID_LEN);
    for (int i = 0; i < N; i++)
        close_client(c[i]);
}

/* A reply to a peer that has gone, or to an id the server never gave, is dropped. */
static void test_unknown_peer(void **state) {
    (void)state;
    const void *frames[1] = {"x"};
    size_t lens[1] = {1};
    uint8_t id[PK_ZMTP_PEER_ID_LEN] = {0x80};
    assert_int_equal(pk_zmtp_front_send(front, id, sizeof id, frames, lens, 1), 1);
    assert_int_equal(pk_zmtp_front_send(front, "\0\0\0\0\1", 5, frames, lens, 1), 1);
    assert_false(pk_zmtp_front_has_peer(front, id, sizeof id));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dealer_and_req), cmocka_unit_test(test_next_counter_attack),
        cmocka_unit_test(test_refusals),       cmocka_unit_test(test_heartbeats),
        cmocka_unit_test(test_unknown_peer),   cmocka_unit_test(test_many_connections),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
