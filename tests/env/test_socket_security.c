/* pk_curve: key files, loopback detection, the secure bind (refusals, CURVE and plain endpoints
 * on one socket), and the ZAP handler: an allowed key gets through with its key as User-Id, any
 * other key never reaches the socket. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <zmq.h>

#include "pk_curve.h"

static char dir[64];

static int setup(void **state) {
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/pk-test-curve-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    return pk_rm_rf(dir);
}

static void path_of(char *out, size_t cap, const char *name) {
    snprintf(out, cap, "%s/%s", dir, name);
}

static void test_loopback(void **state) {
    (void)state;
    const char *yes[] = {"tcp://127.0.0.1:5555",
                         "tcp://127.0.0.1:*",
                         "tcp://127.1.2.3:1",
                         "tcp://[::1]:5555",
                         "tcp://localhost:5555",
                         "tcp://lo:5555",
                         NULL};
    const char *no[] = {"tcp://0.0.0.0:5555",
                        "tcp://*:5555",
                        "tcp://eth0:5555",
                        "tcp://10.0.0.1:5555",
                        "tcp://127.example.com:5555",
                        "tcp://[::]:1",
                        "ipc:///tmp/x",
                        "tcp://example.org:1",
                        NULL};
    for (int i = 0; yes[i]; i++)
        if (!pk_endpoint_is_loopback_tcp(yes[i]))
            fail_msg("%s is loopback", yes[i]);
    for (int i = 0; no[i]; i++)
        if (pk_endpoint_is_loopback_tcp(no[i]))
            fail_msg("%s is not loopback", no[i]);
}

static void test_key_files(void **state) {
    (void)state;
    /* Debian's libzmq has CURVE (libsodium); the server's security relies on it. */
    assert_true(pk_curve_available());
    char base[128], key[160], pub[160];
    path_of(base, sizeof base, "alice");
    snprintf(key, sizeof key, "%s.key", base);
    snprintf(pub, sizeof pub, "%s.pub", base);
    pk_curve_keypair kp, back;
    pk_error err;
    assert_int_equal(pk_curve_keypair_new(&kp, &err), PK_OK);
    assert_int_equal(pk_curve_keypair_save(&kp, base, 0, &err), PK_OK);
    struct stat st;
    assert_int_equal(stat(key, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(pk_curve_keypair_save(&kp, base, 0, &err), PK_ERR_IO); /* no overwrite */
    assert_non_null(strstr(err.message, "--force"));
    assert_int_equal(pk_curve_key_load(key, 1, &back, &err), PK_OK);
    assert_string_equal(back.public_key, kp.public_key);
    assert_string_equal(back.secret_key, kp.secret_key);
    assert_int_equal(pk_curve_key_load(pub, 0, &back, &err), PK_OK);
    assert_string_equal(back.public_key, kp.public_key);
    assert_string_equal(back.secret_key, "");
    assert_int_equal(pk_curve_key_load(pub, 1, &back, &err), PK_ERR_INVALID);
    assert_non_null(strstr(err.message, "not the .pub"));
    /* A bare public key; garbage; a secret key readable by others; a mismatched pair. */
    char bare[160], bad[160], text[200];
    path_of(bare, sizeof bare, "bare");
    snprintf(text, sizeof text, "%s\n", kp.public_key);
    assert_int_equal(pk_write_file(bare, text, strlen(text), &err), PK_OK);
    assert_int_equal(pk_curve_key_load(bare, 0, &back, &err), PK_OK);
    assert_string_equal(back.public_key, kp.public_key);
    path_of(bad, sizeof bad, "bad");
    assert_int_equal(pk_write_file(bad, "hello\n", 6, &err), PK_OK);
    assert_int_equal(pk_curve_key_load(bad, 0, &back, &err), PK_ERR_INVALID);
    chmod(key, 0640);
    assert_int_equal(pk_curve_key_load(key, 1, &back, &err), PK_ERR_INVALID);
    assert_non_null(strstr(err.message, "chmod 600"));
    pk_curve_keypair other;
    assert_int_equal(pk_curve_keypair_new(&other, &err), PK_OK);
    char mixed[400], mixed_path[160];
    snprintf(mixed, sizeof mixed, "public-key = \"%s\"\nsecret-key = \"%s\"\n", kp.public_key,
             other.secret_key);
    path_of(mixed_path, sizeof mixed_path, "mixed.key");
    assert_int_equal(pk_write_file_private(mixed_path, mixed, strlen(mixed), &err), PK_OK);
    assert_int_equal(pk_curve_key_load(mixed_path, 1, &back, &err), PK_ERR_INVALID);
    assert_non_null(strstr(err.message, "does not belong"));
}

static void test_bind_refusals(void **state) {
    (void)state;
    void *ctx = zmq_ctx_new();
    void *s = zmq_socket(ctx, ZMQ_ROUTER);
    pk_error err;
    char resolved[256];
    assert_int_equal(pk_socket_bind_secure(s, NULL, "tcp://0.0.0.0:*", NULL, NULL, 0, resolved,
                                           sizeof resolved, NULL, &err),
                     PK_ERR_INVALID);
    assert_non_null(strstr(err.message, "--insecure"));
    assert_int_equal(pk_socket_bind_secure(s, NULL, "tcp://127.0.0.1:*", NULL, NULL, 0, resolved,
                                           sizeof resolved, NULL, &err),
                     PK_OK);
    assert_non_null(strstr(resolved, "tcp://127.0.0.1:"));
    assert_null(strchr(resolved, '*')); /* the port the kernel picked */
    assert_int_equal(
        pk_socket_bind_secure(s, NULL, "tcp://0.0.0.0:*", NULL, NULL, 1, NULL, 0, NULL, &err),
        PK_OK);
    char ipc[128];
    snprintf(ipc, sizeof ipc, "ipc://%s/s.sock", dir);
    assert_int_equal(pk_socket_bind_secure(s, NULL, ipc, NULL, NULL, 0, NULL, 0, NULL, &err),
                     PK_OK);
    zmq_close(s);
    zmq_ctx_term(ctx);
}

/* Sends hello from a DEALER with the given client keys; returns the User-Id the ROUTER saw, or
 * NULL when nothing arrived within timeout_ms. */
static char *round_trip(void *ctx, void *router, const char *endpoint,
                        const pk_curve_client_keys *keys, int timeout_ms) {
    void *d = zmq_socket(ctx, ZMQ_DEALER);
    int linger = 0;
    zmq_setsockopt(d, ZMQ_LINGER, &linger, sizeof linger);
    pk_error err;
    assert_int_equal(pk_socket_connect_secure(d, endpoint, keys, &err), PK_OK);
    zmq_send(d, "hello", 5, 0);
    zmq_pollitem_t it = {router, 0, ZMQ_POLLIN, 0};
    char *user = NULL;
    if (zmq_poll(&it, 1, timeout_ms) == 1) {
        zmq_msg_t id, body;
        zmq_msg_init(&id);
        zmq_msg_init(&body);
        zmq_msg_recv(&id, router, 0);
        zmq_msg_recv(&body, router, 0);
        const char *u = zmq_msg_gets(&body, "User-Id");
        user = strdup(u ? u : "");
        zmq_msg_close(&id);
        zmq_msg_close(&body);
    }
    zmq_close(d);
    return user;
}

static void test_zap_admits_allowed_keys_only(void **state) {
    (void)state;
    /* Debian's libzmq has CURVE (libsodium); the server's security relies on it. */
    assert_true(pk_curve_available());
    char allow[128], base[256], key[300];
    path_of(allow, sizeof allow, "allow");
    mkdir(allow, 0755);
    pk_curve_keypair server, good, bad;
    pk_error err;
    assert_int_equal(pk_curve_keypair_new(&server, &err), PK_OK);
    assert_int_equal(pk_curve_keypair_new(&good, &err), PK_OK);
    assert_int_equal(pk_curve_keypair_new(&bad, &err), PK_OK);
    path_of(base, sizeof base, "server");
    assert_int_equal(pk_curve_keypair_save(&server, base, 1, &err), PK_OK);
    snprintf(key, sizeof key, "%s.key", base);
    snprintf(base, sizeof base, "%s/good", allow);
    assert_int_equal(pk_curve_keypair_save(&good, base, 1, &err), PK_OK);
    snprintf(base, sizeof base, "%s/good.key", allow);
    unlink(base); /* only the public key stays in the allow directory */

    void *ctx = zmq_ctx_new();
    pk_curve_server *cs = NULL;
    assert_int_equal(pk_curve_server_start(ctx, key, &cs, &err), PK_OK);
    assert_int_equal(pk_curve_server_allow(cs, PK_CURVE_DOMAIN_CLIENTS, allow, &err), PK_OK);
    void *router = zmq_socket(ctx, ZMQ_ROUTER);
    int linger = 0;
    zmq_setsockopt(router, ZMQ_LINGER, &linger, sizeof linger);
    char tcp[256], ipc[128];
    assert_int_equal(pk_socket_bind_secure(router, NULL, "tcp://127.0.0.1:*", cs,
                                           PK_CURVE_DOMAIN_CLIENTS, 0, tcp, sizeof tcp, NULL, &err),
                     PK_OK);
    snprintf(ipc, sizeof ipc, "ipc://%s/plain.sock", dir);
    assert_int_equal(pk_socket_bind_secure(router, NULL, ipc, cs, PK_CURVE_DOMAIN_CLIENTS, 0, NULL,
                                           0, NULL, &err),
                     PK_OK);

    pk_curve_client_keys ck;
    memset(&ck, 0, sizeof ck);
    snprintf(ck.server_public, sizeof ck.server_public, "%s", server.public_key);
    ck.client = good;
    char *user = round_trip(ctx, router, tcp, &ck, 5000);
    assert_non_null(user);
    assert_string_equal(user, good.public_key); /* the key is the client's identity */
    free(user);
    ck.client = bad;
    assert_null(round_trip(ctx, router, tcp, &ck, 500));
    assert_null(round_trip(ctx, router, tcp, NULL, 500)); /* no CURVE at all */
    user = round_trip(ctx, router, ipc, NULL, 5000);      /* ipc:// stays plain */
    assert_non_null(user);
    assert_string_equal(user, "");
    free(user);
    unsigned long admitted, refused;
    pk_curve_server_counts(cs, &admitted, &refused);
    assert_true(admitted >= 1 && refused >= 1);

    /* Adding a key file takes effect at the next connection. */
    snprintf(base, sizeof base, "%s/late", allow);
    assert_int_equal(pk_curve_keypair_save(&bad, base, 1, &err), PK_OK);
    user = round_trip(ctx, router, tcp, &ck, 5000);
    assert_non_null(user);
    assert_string_equal(user, bad.public_key);
    free(user);

    zmq_close(router);
    pk_curve_server_stop(cs);
    zmq_ctx_term(ctx);
}

/* Issue 27, finding 2: one rule for every transport libzmq has. ws:// was bound on every
 * interface without CURVE, and served keyless clients under --curve-allow. */
static void test_every_transport(void **state) {
    (void)state;
    void *ctx = zmq_ctx_new();
    void *s = zmq_socket(ctx, ZMQ_ROUTER);
    int linger = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
    pk_error err;
    /* Network transports without CURVE: loopback only, unless insecure. */
    const char *open_net[] = {"ws://0.0.0.0:*",        "ws://[::]:*",       "wss://0.0.0.0:*",
                              "ws://example.com:5555", "tipc://{5560,0,0}", "vmci://1:5555",
                              "tcp://0.0.0.0:*"};
    for (size_t i = 0; i < sizeof open_net / sizeof *open_net; i++) {
        pk_error_clear(&err);
        assert_int_equal(
            pk_socket_bind_secure(s, NULL, open_net[i], NULL, NULL, 0, NULL, 0, NULL, &err),
            PK_ERR_INVALID);
        assert_non_null(strstr(err.message, "--insecure"));
        assert_true(pk_endpoint_uses_curve(open_net[i]));
    }
    char resolved[256];
    assert_int_equal(pk_socket_bind_secure(s, NULL, "ws://127.0.0.1:*", NULL, NULL, 0, resolved,
                                           sizeof resolved, NULL, &err),
                     PK_OK);
    assert_non_null(strstr(resolved, "ws://127.0.0.1:"));
    assert_true(pk_endpoint_is_loopback("ws://127.0.0.1:80/path"));
    assert_true(pk_endpoint_is_loopback("wss://[::1]:443/x"));
    assert_false(pk_endpoint_is_loopback("ws://127.0.0.1.example.com:80/x"));
    assert_false(pk_endpoint_is_loopback("tipc://{5560,0,0}"));
    /* Transports without request-reply sockets, and unknown ones: refused, even insecure. */
    const char *refused[] = {"pgm://eth0;239.1.1.1:5555", "epgm://lo;239.1.1.1:5555",
                             "norm://127.0.0.1:5555",     "udp://127.0.0.1:5555",
                             "foo://127.0.0.1:5555",      "tcp:/127.0.0.1:5555",
                             "TCP://127.0.0.1:5555",      ""};
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
        assert_int_equal(
            pk_socket_bind_secure(s, NULL, refused[i], NULL, NULL, 1, NULL, 0, NULL, &err),
            PK_ERR_INVALID);
        void *d = zmq_socket(ctx, ZMQ_DEALER);
        assert_int_equal(pk_socket_connect_secure(d, refused[i], NULL, &err), PK_ERR_INVALID);
        zmq_close(d);
    }
    /* Local transports stay plain. */
    char ipc[128];
    snprintf(ipc, sizeof ipc, "ipc://%s/every.sock", dir);
    assert_int_equal(pk_socket_bind_secure(s, NULL, ipc, NULL, NULL, 0, NULL, 0, NULL, &err),
                     PK_OK);
    assert_int_equal(
        pk_socket_bind_secure(s, NULL, "inproc://every", NULL, NULL, 0, NULL, 0, NULL, &err),
        PK_OK);
    assert_false(pk_endpoint_uses_curve(ipc));
    assert_false(pk_endpoint_uses_curve("inproc://every"));
    zmq_close(s);
    zmq_ctx_term(ctx);
}

/* The socket an endpoint was bound to: its last endpoint starts with prefix. */
static int bound_to(void *sock, const char *prefix) {
    char last[256];
    size_t n = sizeof last;
    return zmq_getsockopt(sock, ZMQ_LAST_ENDPOINT, last, &n) == 0 &&
           strncmp(last, prefix, strlen(prefix)) == 0;
}

static void curve_pair(void *ctx, const char *name, pk_curve_server **cs, pk_curve_client_keys *ck);

/* Issue 27, finding 1: with a STREAM socket for the plain endpoints (the server's client
 * endpoints), the rule puts each transport where no client can choose its routing id: plain
 * tcp:// and ipc:// on the STREAM socket, CURVE endpoints and inproc:// on the ROUTER, and the
 * plain transports STREAM lacks (ws, wss, tipc, vmci) refused, loopback or not, --insecure or
 * not, with the reason and the alternatives. */
static void test_plain_endpoints_on_stream(void **state) {
    (void)state;
    void *ctx = zmq_ctx_new();
    void *router = zmq_socket(ctx, ZMQ_ROUTER), *stream = zmq_socket(ctx, ZMQ_STREAM);
    int linger = 0;
    zmq_setsockopt(router, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(stream, ZMQ_LINGER, &linger, sizeof linger);
    pk_error err;
    int on_stream = -1;
    char resolved[256], ipc[128];
    assert_int_equal(pk_socket_bind_secure(router, stream, "tcp://127.0.0.1:*", NULL, NULL, 0,
                                           resolved, sizeof resolved, &on_stream, &err),
                     PK_OK);
    assert_int_equal(on_stream, 1);
    assert_true(bound_to(stream, resolved));
    assert_false(bound_to(router, "tcp://"));
    snprintf(ipc, sizeof ipc, "ipc://%s/stream.sock", dir);
    assert_int_equal(
        pk_socket_bind_secure(router, stream, ipc, NULL, NULL, 0, NULL, 0, &on_stream, &err),
        PK_OK);
    assert_int_equal(on_stream, 1);
    assert_true(bound_to(stream, ipc));
    assert_int_equal(pk_socket_bind_secure(router, stream, "inproc://stream-rule", NULL, NULL, 0,
                                           NULL, 0, &on_stream, &err),
                     PK_OK);
    assert_int_equal(on_stream, 0);
    assert_true(bound_to(router, "inproc://stream-rule"));
    const char *no_stream[] = {"ws://127.0.0.1:*", "ws://0.0.0.0:*", "wss://[::1]:*",
                               "tipc://{5560,0,0}", "vmci://1:5555"};
    for (size_t i = 0; i < sizeof no_stream / sizeof *no_stream; i++) {
        for (int insecure = 0; insecure <= 1; insecure++) {
            pk_error_clear(&err);
            on_stream = -1;
            assert_int_equal(pk_socket_bind_secure(router, stream, no_stream[i], NULL, NULL,
                                                   insecure, NULL, 0, &on_stream, &err),
                             PK_ERR_INVALID);
            assert_int_equal(on_stream, 0);
            assert_non_null(strstr(err.message, "finding 1"));
            assert_non_null(strstr(err.message, "tcp:// or ipc://"));
            assert_non_null(strstr(err.message, "--curve-secret-key"));
        }
    }
    /* Without a STREAM socket (the broker's worker endpoint) plain ws:// on loopback stays. */
    assert_int_equal(pk_socket_bind_secure(router, NULL, "ws://127.0.0.1:*", NULL, NULL, 0, NULL, 0,
                                           &on_stream, &err),
                     PK_OK);
    assert_int_equal(on_stream, 0);
    /* With CURVE: tcp:// and ws:// on the ROUTER (the ZAP handler names the peers), ipc://
     * still on the STREAM socket. */
    pk_curve_server *cs = NULL;
    pk_curve_client_keys ck;
    curve_pair(ctx, "allow-stream", &cs, &ck);
    void *router2 = zmq_socket(ctx, ZMQ_ROUTER), *stream2 = zmq_socket(ctx, ZMQ_STREAM);
    zmq_setsockopt(router2, ZMQ_LINGER, &linger, sizeof linger);
    zmq_setsockopt(stream2, ZMQ_LINGER, &linger, sizeof linger);
    const char *curved[] = {"tcp://127.0.0.1:*", "ws://127.0.0.1:*"};
    for (size_t i = 0; i < sizeof curved / sizeof *curved; i++) {
        assert_int_equal(pk_socket_bind_secure(router2, stream2, curved[i], cs,
                                               PK_CURVE_DOMAIN_CLIENTS, 0, resolved,
                                               sizeof resolved, &on_stream, &err),
                         PK_OK);
        assert_int_equal(on_stream, 0);
        assert_true(bound_to(router2, resolved));
    }
    snprintf(ipc, sizeof ipc, "ipc://%s/stream2.sock", dir);
    assert_int_equal(pk_socket_bind_secure(router2, stream2, ipc, cs, PK_CURVE_DOMAIN_CLIENTS, 0,
                                           NULL, 0, &on_stream, &err),
                     PK_OK);
    assert_int_equal(on_stream, 1);
    assert_true(bound_to(stream2, ipc));
    zmq_close(router);
    zmq_close(stream);
    zmq_close(router2);
    zmq_close(stream2);
    pk_curve_server_stop(cs);
    zmq_ctx_term(ctx);
}

/* A CURVE server and a client key it allows, for the tests below. */
static void curve_pair(void *ctx, const char *name, pk_curve_server **cs,
                       pk_curve_client_keys *ck) {
    char allow[128], base[256], key[300];
    path_of(allow, sizeof allow, name);
    mkdir(allow, 0755);
    pk_curve_keypair server, client;
    pk_error err;
    assert_int_equal(pk_curve_keypair_new(&server, &err), PK_OK);
    assert_int_equal(pk_curve_keypair_new(&client, &err), PK_OK);
    snprintf(base, sizeof base, "%s-server", allow);
    assert_int_equal(pk_curve_keypair_save(&server, base, 1, &err), PK_OK);
    snprintf(key, sizeof key, "%s.key", base);
    snprintf(base, sizeof base, "%s/client", allow);
    pk_curve_keypair pub = client;
    pub.secret_key[0] = '\0';
    assert_int_equal(pk_curve_keypair_save(&pub, base, 1, &err), PK_OK);
    snprintf(base, sizeof base, "%s/client.key", allow);
    unlink(base);
    assert_int_equal(pk_curve_server_start(ctx, key, cs, &err), PK_OK);
    assert_int_equal(pk_curve_server_allow(*cs, PK_CURVE_DOMAIN_CLIENTS, allow, &err), PK_OK);
    memset(ck, 0, sizeof *ck);
    snprintf(ck->server_public, sizeof ck->server_public, "%s", server.public_key);
    ck->client = client;
}

/* Issue 27, finding 2: with keys, ws:// is CURVE like tcp://; a keyless client gets nothing. */
static void test_ws_gets_curve(void **state) {
    (void)state;
    void *ctx = zmq_ctx_new();
    pk_curve_server *cs = NULL;
    pk_curve_client_keys ck;
    curve_pair(ctx, "allow-ws", &cs, &ck);
    void *router = pk_router_socket_new(ctx);
    int linger = 0;
    zmq_setsockopt(router, ZMQ_LINGER, &linger, sizeof linger);
    pk_error err;
    char ws[256];
    assert_int_equal(pk_socket_bind_secure(router, NULL, "ws://127.0.0.1:*", cs,
                                           PK_CURVE_DOMAIN_CLIENTS, 0, ws, sizeof ws, NULL, &err),
                     PK_OK);
    char local[300];
    snprintf(local, sizeof local, "ws://127.0.0.1%s", strrchr(ws, ':'));
    assert_null(round_trip(ctx, router, local, NULL, 500)); /* keyless: refused */
    char *user = round_trip(ctx, router, local, &ck, 5000);
    assert_non_null(user);
    assert_string_equal(user, ck.client.public_key);
    free(user);
    zmq_close(router);
    pk_curve_server_stop(cs);
    zmq_ctx_term(ctx);
}

/* Issue 27, finding 1: a CURVE client's routing id is the server's choice, whatever it sets;
 * here one that claims the form of the ids the ROUTER generates. */
static void test_curve_client_routing_id_is_the_servers(void **state) {
    (void)state;
    void *ctx = zmq_ctx_new();
    pk_curve_server *cs = NULL;
    pk_curve_client_keys ck;
    curve_pair(ctx, "allow-ids", &cs, &ck);
    void *router = pk_router_socket_new(ctx);
    int linger = 0;
    zmq_setsockopt(router, ZMQ_LINGER, &linger, sizeof linger);
    pk_error err;
    char tcp[256];
    assert_int_equal(pk_socket_bind_secure(router, NULL, "tcp://127.0.0.1:*", cs,
                                           PK_CURVE_DOMAIN_CLIENTS, 0, tcp, sizeof tcp, NULL, &err),
                     PK_OK);
    /* Four clients, each claiming an id of the generated form. The ZAP reply that replaces
     * it is held 20 ms so that libzmq reads it last; a stall of libzmq's I/O thread longer
     * than that could let one client's id stand, so three of four must be the server's (with
     * no hold, half were the clients'). */
    enum { CLIENTS = 4 };
    unsigned char seen[CLIENTS][256];
    int server_ids = 0;
    for (int i = 0; i < CLIENTS; i++) {
        void *d = zmq_socket(ctx, ZMQ_DEALER);
        zmq_setsockopt(d, ZMQ_LINGER, &linger, sizeof linger);
        const unsigned char chosen[5] = {0, 0x6b, 0x8b, 0x45, (unsigned char)(0x67 + i)};
        zmq_setsockopt(d, ZMQ_ROUTING_ID, chosen, sizeof chosen);
        assert_int_equal(pk_socket_connect_secure(d, tcp, &ck, &err), PK_OK);
        zmq_send(d, "hello", 5, 0);
        zmq_pollitem_t it = {router, 0, ZMQ_POLLIN, 0};
        assert_int_equal(zmq_poll(&it, 1, 5000), 1);
        memset(seen[i], 0, sizeof seen[i]);
        int n = zmq_recv(router, seen[i], sizeof seen[i], 0);
        char body[16];
        assert_int_equal(zmq_recv(router, body, sizeof body, 0), 5);
        if (n == 16 && seen[i][0] == 1) {
            server_ids++;
            for (int j = 0; j < i; j++) /* unique */
                assert_memory_not_equal(seen[i], seen[j], 16);
        } else {
            assert_int_equal(n, (int)sizeof chosen);
            assert_memory_equal(seen[i], chosen, sizeof chosen);
        }
        zmq_close(d);
    }
    assert_true(server_ids >= CLIENTS - 1);
    zmq_close(router);
    pk_curve_server_stop(cs);
    zmq_ctx_term(ctx);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loopback),
        cmocka_unit_test(test_key_files),
        cmocka_unit_test(test_bind_refusals),
        cmocka_unit_test(test_zap_admits_allowed_keys_only),
        cmocka_unit_test(test_every_transport),
        cmocka_unit_test(test_plain_endpoints_on_stream),
        cmocka_unit_test(test_ws_gets_curve),
        cmocka_unit_test(test_curve_client_routing_id_is_the_servers),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
