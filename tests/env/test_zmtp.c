/* pk_zmtp (issue 27, finding 1): the server side of ZMTP 3.0/3.1 with the NULL mechanism, as
 * the plain client endpoints speak it on a ZMQ_STREAM socket. The same bytes parsed whole and
 * split at every byte boundary give the same events; bad greetings, refused socket types,
 * oversized frames and messages, and every command. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pk_zmtp.h"

/* ---- building a client's bytes ---- */

typedef struct bytes {
    uint8_t b[8192];
    size_t n;
} bytes;

static void put(bytes *o, const void *p, size_t n) {
    assert_true(o->n + n <= sizeof o->b);
    memcpy(o->b + o->n, p, n);
    o->n += n;
}

/* A client's greeting: libzmq's signature (0xFF, padding, 0x7F), 3.minor, the mechanism. */
static void greeting(bytes *o, int major, int minor, const char *mechanism) {
    uint8_t g[64] = {0xFF, 0, 0, 0, 0, 0, 0, 0, 1, 0x7F};
    g[10] = (uint8_t)major;
    g[11] = (uint8_t)minor;
    memcpy(g + 12, mechanism, strlen(mechanism));
    put(o, g, sizeof g);
}

static void frame(bytes *o, uint8_t flags, const void *data, size_t n, int force_long) {
    uint8_t h[9];
    if (n > 255 || force_long) {
        h[0] = flags | 0x02;
        uint64_t s = n;
        for (int i = 8; i >= 1; i--, s >>= 8)
            h[i] = (uint8_t)s;
        put(o, h, 9);
    } else {
        h[0] = flags;
        h[1] = (uint8_t)n;
        put(o, h, 2);
    }
    put(o, data, n);
}

static void command(bytes *o, const char *name, const void *data, size_t n) {
    uint8_t body[1024];
    size_t k = strlen(name);
    body[0] = (uint8_t)k;
    memcpy(body + 1, name, k);
    memcpy(body + 1 + k, data, n);
    frame(o, 0x04, body, 1 + k + n, 0);
}

static size_t property(uint8_t *p, const char *name, const void *value, uint32_t n) {
    size_t k = strlen(name);
    p[0] = (uint8_t)k;
    memcpy(p + 1, name, k);
    p[1 + k] = (uint8_t)(n >> 24);
    p[2 + k] = (uint8_t)(n >> 16);
    p[3 + k] = (uint8_t)(n >> 8);
    p[4 + k] = (uint8_t)n;
    memcpy(p + 5 + k, value, n);
    return 5 + k + n;
}

/* READY with Socket-Type, and an Identity when id is given (it must be ignored). */
static void ready(bytes *o, const char *type, const void *id, size_t id_len) {
    uint8_t props[512];
    size_t n = 0;
    if (type)
        n += property(props + n, "Socket-Type", type, (uint32_t)strlen(type));
    if (id)
        n += property(props + n, "Identity", id, (uint32_t)id_len);
    command(o, "READY", props, n);
}

/* ---- running the parser as pk_zmtp_front does: a buffer of what is not consumed yet ---- */

typedef struct event {
    pk_zmtp_kind kind;
    size_t size;
    int more, send_error;
    uint8_t data[512];
    char peer_type[24];
    char reason[160];
} event;

typedef struct run {
    event ev[64];
    int n;
} run;

/* Feeds the bytes in pieces of at most step (0: the first cut at `cut`, then the rest). */
static void feed(const bytes *in, size_t max_message, size_t cut, size_t step, run *r) {
    pk_zmtp_conn c;
    pk_zmtp_conn_init(&c, max_message);
    static uint8_t buf[8192];
    size_t have = 0, off = 0, given = 0;
    memset(r, 0, sizeof *r);
    for (int first = 1;; first = 0) {
        size_t left = in->n - given;
        size_t piece = step ? step : (first ? cut : left);
        if (piece > left)
            piece = left;
        memcpy(buf + have, in->b + given, piece);
        have += piece;
        given += piece;
        for (;;) {
            pk_zmtp_event ev;
            size_t used = 0;
            pk_zmtp_kind k = pk_zmtp_parse(&c, buf + off, have - off, &used, &ev);
            if (k == PK_ZMTP_NEED_MORE) {
                assert_int_equal(used, 0);
                break;
            }
            assert_true(r->n < 64);
            event *e = &r->ev[r->n++];
            e->kind = k;
            e->size = ev.size;
            e->more = ev.more;
            e->send_error = ev.send_error;
            if (ev.data && ev.size <= sizeof e->data)
                memcpy(e->data, ev.data, ev.size);
            snprintf(e->peer_type, sizeof e->peer_type, "%s", ev.peer_type);
            snprintf(e->reason, sizeof e->reason, "%s", ev.reason);
            if (k == PK_ZMTP_CLOSE)
                return;
            assert_true(used > 0);
            off += used;
        }
        if (given == in->n)
            break;
    }
}

static void assert_same(const run *a, const run *b) {
    assert_int_equal(a->n, b->n);
    for (int i = 0; i < a->n; i++) {
        assert_int_equal(a->ev[i].kind, b->ev[i].kind);
        assert_int_equal(a->ev[i].size, b->ev[i].size);
        assert_int_equal(a->ev[i].more, b->ev[i].more);
        assert_int_equal(a->ev[i].send_error, b->ev[i].send_error);
        assert_memory_equal(a->ev[i].data, b->ev[i].data,
                            a->ev[i].size < sizeof a->ev[i].data ? a->ev[i].size : 0);
        assert_string_equal(a->ev[i].peer_type, b->ev[i].peer_type);
    }
}

/* Every split of in (one cut anywhere, and byte by byte) gives the events of the whole. */
static void assert_split_invariant(const bytes *in, size_t max_message, run *whole) {
    feed(in, max_message, in->n, 0, whole);
    for (size_t cut = 0; cut <= in->n; cut++) {
        run r;
        feed(in, max_message, cut, 0, &r);
        assert_same(whole, &r);
    }
    run r;
    feed(in, max_message, 0, 1, &r);
    assert_same(whole, &r);
}

/* A DEALER's session: greeting, READY (with an Identity of libzmq's generated form), a
 * request as a REQ sends it (empty delimiter, body), a PING with context, a long frame, a
 * body sent with an 8-byte size although short, a PONG. */
static void test_session_split_everywhere(void **state) {
    (void)state;
    bytes in = {0};
    greeting(&in, 3, 1, "NULL");
    ready(&in, "DEALER", "\0\0\0\0\1", 5);
    frame(&in, 0x01, "", 0, 0);
    frame(&in, 0x00, "hello", 5, 0);
    command(&in, "PING",
            "\0\x0a"
            "ctx",
            5);
    uint8_t big[300];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (uint8_t)i;
    frame(&in, 0x00, big, sizeof big, 0);
    frame(&in, 0x00, "x", 1, 1);
    command(&in, "PONG", "ctx", 3);
    run whole;
    assert_split_invariant(&in, 1000, &whole);
    assert_int_equal(whole.n, 8);
    assert_int_equal(whole.ev[0].kind, PK_ZMTP_CONSUMED); /* the greeting */
    assert_int_equal(whole.ev[1].kind, PK_ZMTP_READY);
    assert_string_equal(whole.ev[1].peer_type, "DEALER");
    assert_int_equal(whole.ev[2].kind, PK_ZMTP_FRAME);
    assert_int_equal(whole.ev[2].size, 0);
    assert_int_equal(whole.ev[2].more, 1);
    assert_int_equal(whole.ev[3].kind, PK_ZMTP_FRAME);
    assert_int_equal(whole.ev[3].more, 0);
    assert_memory_equal(whole.ev[3].data, "hello", 5);
    assert_int_equal(whole.ev[4].kind, PK_ZMTP_PING);
    assert_int_equal(whole.ev[4].size, 3);
    assert_memory_equal(whole.ev[4].data, "ctx", 3);
    assert_int_equal(whole.ev[5].kind, PK_ZMTP_FRAME);
    assert_int_equal(whole.ev[5].size, 300);
    assert_memory_equal(whole.ev[5].data, big, 300);
    assert_int_equal(whole.ev[6].kind, PK_ZMTP_FRAME);
    assert_int_equal(whole.ev[6].size, 1);
    assert_int_equal(whole.ev[7].kind, PK_ZMTP_CONSUMED); /* PONG */
}

/* REQ and ZMTP 3.0 are served; so is a later minor version. */
static void test_req_and_versions(void **state) {
    (void)state;
    for (int minor = 0; minor <= 2; minor++) {
        bytes in = {0};
        greeting(&in, 3, minor, "NULL");
        ready(&in, "REQ", NULL, 0);
        frame(&in, 0x01, "", 0, 0);
        frame(&in, 0x00, "q", 1, 0);
        run whole;
        assert_split_invariant(&in, 100, &whole);
        assert_int_equal(whole.n, 4);
        assert_int_equal(whole.ev[1].kind, PK_ZMTP_READY);
        assert_string_equal(whole.ev[1].peer_type, "REQ");
        assert_int_equal(whole.ev[3].kind, PK_ZMTP_FRAME);
    }
}

/* Feeds in whole and expects the last event to be CLOSE after `events` events. */
static const event *closes(const bytes *in, size_t max_message, int events, int send_error) {
    static run whole;
    assert_split_invariant(in, max_message, &whole);
    assert_int_equal(whole.n, events);
    const event *e = &whole.ev[whole.n - 1];
    assert_int_equal(e->kind, PK_ZMTP_CLOSE);
    assert_int_equal(e->send_error, send_error);
    assert_true(strlen(e->reason) > 0);
    return e;
}

/* A peer that does not speak ZMTP 3 is closed as soon as its bytes show it, with no ERROR. */
static void test_bad_greetings(void **state) {
    (void)state;
    bytes http = {0};
    put(&http, "GET / HTTP/1.1\r\n\r\n", 18);
    closes(&http, 100, 1, 0);
    { /* the first byte decides: nothing more is waited for */
        pk_zmtp_conn c;
        pk_zmtp_conn_init(&c, 100);
        pk_zmtp_event ev;
        size_t used;
        assert_int_equal(pk_zmtp_parse(&c, (const uint8_t *)"G", 1, &used, &ev), PK_ZMTP_CLOSE);
        assert_int_equal(pk_zmtp_parse(&c, (const uint8_t *)"\xff", 1, &used, &ev),
                         PK_ZMTP_CLOSE); /* and stays closed */
    }
    bytes zmtp10 = {0};
    uint8_t old[10] = {0xFF, 0, 0, 0, 0, 0, 0, 0, 1, 0x7E};
    put(&zmtp10, old, sizeof old);
    put(&zmtp10, "more", 4);
    assert_non_null(strstr(closes(&zmtp10, 100, 1, 0)->reason, "1.0"));
    bytes v2 = {0};
    greeting(&v2, 2, 0, "NULL");
    closes(&v2, 100, 1, 0);
    bytes curve = {0};
    greeting(&curve, 3, 0, "CURVE");
    assert_non_null(strstr(closes(&curve, 100, 1, 0)->reason, "NULL"));
    bytes plain = {0};
    greeting(&plain, 3, 1, "NULLX");
    closes(&plain, 100, 1, 0);
    /* The signature alone, then nothing: the parser waits (the front's buffer bounds it). */
    bytes sig = {0};
    put(&sig, old, 9);
    uint8_t b9 = 0x7F, major = 3;
    put(&sig, &b9, 1);
    put(&sig, &major, 1);
    run r;
    assert_split_invariant(&sig, 100, &r);
    assert_int_equal(r.n, 0);
}

/* Only DEALER and REQ: any other socket type gets an ERROR naming the alternatives. */
static void test_socket_types(void **state) {
    (void)state;
    const char *refused[] = {"PUB", "SUB", "ROUTER", "PAIR", "PUSH", "XSUB", "dealer", "", NULL};
    for (int i = 0; refused[i]; i++) {
        bytes in = {0};
        greeting(&in, 3, 1, "NULL");
        ready(&in, refused[i], NULL, 0);
        const event *e = closes(&in, 100, 2, 1);
        assert_non_null(strstr(e->reason, "DEALER or REQ"));
    }
    bytes too_long = {0}; /* longer than any socket type */
    greeting(&too_long, 3, 1, "NULL");
    ready(&too_long, "DEALERDEALERDEALERDEALER", NULL, 0);
    assert_non_null(strstr(closes(&too_long, 100, 2, 1)->reason, "too long"));
    bytes none = {0}; /* READY without Socket-Type */
    greeting(&none, 3, 1, "NULL");
    ready(&none, NULL, "id", 2);
    closes(&none, 100, 2, 1);
    bytes bad = {0}; /* a property running past the command */
    greeting(&bad, 3, 1, "NULL");
    uint8_t props[32];
    size_t n = property(props, "Socket-Type", "DEALER", 6);
    props[n - 7] = 0x40; /* value size 0x40: past the command */
    command(&bad, "READY", props, n);
    assert_non_null(strstr(closes(&bad, 100, 2, 1)->reason, "malformed"));
    bytes other = {0}; /* a command other than READY in the handshake */
    greeting(&other, 3, 1, "NULL");
    command(&other, "HELLO", "", 0);
    closes(&other, 100, 2, 1);
    bytes early = {0}; /* a message before READY */
    greeting(&early, 3, 1, "NULL");
    frame(&early, 0x00, "x", 1, 0);
    closes(&early, 100, 2, 1);
}

static void served(bytes *in) {
    greeting(in, 3, 1, "NULL");
    ready(in, "DEALER", NULL, 0);
}

/* One message holds at most max_message bytes, all its frames together; the check comes with
 * the header, before the frame's bytes are there. */
static void test_sizes(void **state) {
    (void)state;
    uint8_t data[256];
    memset(data, 'a', sizeof data);
    bytes exact = {0};
    served(&exact);
    frame(&exact, 0x01, data, 40, 0);
    frame(&exact, 0x00, data, 60, 0);
    frame(&exact, 0x00, data, 100, 0); /* a new message: the count starts again */
    run r;
    assert_split_invariant(&exact, 100, &r);
    assert_int_equal(r.n, 5);
    assert_int_equal(r.ev[4].kind, PK_ZMTP_FRAME);

    bytes over = {0};
    served(&over);
    frame(&over, 0x01, data, 40, 0);
    frame(&over, 0x00, data, 61, 0);
    assert_non_null(strstr(closes(&over, 100, 4, 1)->reason, "larger than 100"));

    /* A header announcing 2^63 bytes: closed with only the header sent. */
    bytes huge = {0};
    served(&huge);
    uint8_t h[9] = {0x02, 0x80, 0, 0, 0, 0, 0, 0, 0};
    put(&huge, h, sizeof h);
    closes(&huge, 1 << 20, 3, 1);
    uint8_t h2[9] = {0x02, 0, 0, 0, 0, 0, 0x10, 0, 1}; /* 1 MiB + 1 */
    bytes just = {0};
    served(&just);
    put(&just, h2, sizeof h2);
    closes(&just, 1 << 20, 3, 1);

    /* Commands: at most PK_ZMTP_MAX_COMMAND bytes. */
    bytes cmd = {0};
    served(&cmd);
    uint8_t ch[9] = {0x06, 0, 0, 0, 0, 0, 0, 0x20, 1};
    put(&cmd, ch, sizeof ch);
    closes(&cmd, 1 << 20, 3, 1);
}

/* Commands after the handshake. */
static void test_commands(void **state) {
    (void)state;
    bytes err = {0}; /* the peer's ERROR closes, no ERROR back */
    served(&err);
    command(&err, "ERROR",
            "\x03"
            "bye",
            4);
    closes(&err, 100, 3, 0);
    bytes twice = {0};
    served(&twice);
    ready(&twice, "DEALER", NULL, 0);
    closes(&twice, 100, 3, 1);
    bytes more_cmd = {0}; /* a command with MORE */
    served(&more_cmd);
    frame(&more_cmd, 0x05, "\x04PING\0\0", 7, 0);
    closes(&more_cmd, 100, 3, 1);
    bytes reserved = {0};
    served(&reserved);
    frame(&reserved, 0x08, "x", 1, 0);
    closes(&reserved, 100, 3, 1);
    bytes bad_ping = {0}; /* no TTL */
    served(&bad_ping);
    command(&bad_ping, "PING", "\0", 1);
    closes(&bad_ping, 100, 3, 1);
    bytes long_ctx = {0}; /* a context over 16 bytes */
    served(&long_ctx);
    command(&long_ctx, "PING",
            "\0\0"
            "0123456789abcdefg",
            19);
    closes(&long_ctx, 100, 3, 1);
    bytes empty_name = {0};
    served(&empty_name);
    frame(&empty_name, 0x04, "", 0, 0);
    closes(&empty_name, 100, 3, 1);
    bytes name_past = {0};
    served(&name_past);
    frame(&name_past, 0x04, "\x09PING", 5, 0);
    closes(&name_past, 100, 3, 1);

    /* Commands of other socket types and versions are ignored, traffic goes on. */
    bytes other = {0};
    served(&other);
    command(&other, "SUBSCRIBE", "topic", 5);
    command(&other, "PING", "\0\0", 2); /* no context */
    frame(&other, 0x00, "m", 1, 0);
    run r;
    assert_split_invariant(&other, 100, &r);
    assert_int_equal(r.n, 5);
    assert_int_equal(r.ev[2].kind, PK_ZMTP_CONSUMED);
    assert_int_equal(r.ev[3].kind, PK_ZMTP_PING);
    assert_int_equal(r.ev[3].size, 0);
    assert_int_equal(r.ev[4].kind, PK_ZMTP_FRAME);
}

/* What the server sends, byte for byte as RFC 23 and RFC 37 lay them out. */
static void test_encoders(void **state) {
    (void)state;
    uint8_t g[64];
    pk_zmtp_encode_greeting(g);
    assert_int_equal(g[0], 0xFF);
    assert_int_equal(g[9], 0x7F);
    assert_int_equal(g[10], 3);
    assert_int_equal(g[11], 1);
    assert_memory_equal(g + 12, "NULL\0", 5);
    assert_int_equal(g[32], 1);
    uint8_t b[300];
    size_t n = pk_zmtp_encode_ready(b, sizeof b, "ROUTER");
    static const uint8_t want_ready[] = {0x04, 28,  5,   'R', 'E', 'A', 'D', 'Y', 11,  'S',
                                         'o',  'c', 'k', 'e', 't', '-', 'T', 'y', 'p', 'e',
                                         0,    0,   0,   6,   'R', 'O', 'U', 'T', 'E', 'R'};
    assert_int_equal(n, sizeof want_ready);
    assert_memory_equal(b, want_ready, n);
    assert_int_equal(pk_zmtp_encode_ready(b, 10, "ROUTER"), 0);
    n = pk_zmtp_encode_pong(b, sizeof b, (const uint8_t *)"ctx", 3);
    assert_int_equal(n, 2 + 1 + 4 + 3);
    assert_memory_equal(b, "\x04\x08\x04PONGctx", n);
    assert_int_equal(pk_zmtp_encode_pong(b, sizeof b, b, 17), 0);
    n = pk_zmtp_encode_error(b, sizeof b, "no");
    assert_memory_equal(b,
                        "\x04\x09\x05"
                        "ERROR\x02no",
                        n);
    char longr[400];
    memset(longr, 'r', sizeof longr - 1);
    longr[sizeof longr - 1] = '\0';
    n = pk_zmtp_encode_error(b, sizeof b, longr); /* the reason is cut at 255 bytes */
    assert_int_equal(n, 9 + 1 + 5 + 1 + 255);
    assert_int_equal(b[0], 0x06);
    uint8_t h[9];
    assert_int_equal(pk_zmtp_encode_frame_header(h, 255, 1), 2);
    assert_memory_equal(h, "\x01\xff", 2);
    assert_int_equal(pk_zmtp_encode_frame_header(h, 256, 0), 9);
    assert_memory_equal(h, "\x02\0\0\0\0\0\0\x01\0", 9);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_session_split_everywhere),
        cmocka_unit_test(test_req_and_versions),
        cmocka_unit_test(test_bad_greetings),
        cmocka_unit_test(test_socket_types),
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_commands),
        cmocka_unit_test(test_encoders),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
