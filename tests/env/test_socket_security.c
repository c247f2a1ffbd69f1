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
    assert_int_equal(
        pk_socket_bind_secure(s, "tcp://0.0.0.0:*", NULL, NULL, 0, resolved, sizeof resolved, &err),
        PK_ERR_INVALID);
    assert_non_null(strstr(err.message, "--insecure"));
    assert_int_equal(pk_socket_bind_secure(s, "tcp://127.0.0.1:*", NULL, NULL, 0, resolved,
                                           sizeof resolved, &err),
                     PK_OK);
    assert_non_null(strstr(resolved, "tcp://127.0.0.1:"));
    assert_null(strchr(resolved, '*')); /* the port the kernel picked */
    assert_int_equal(pk_socket_bind_secure(s, "tcp://0.0.0.0:*", NULL, NULL, 1, NULL, 0, &err),
                     PK_OK);
    char ipc[128];
    snprintf(ipc, sizeof ipc, "ipc://%s/s.sock", dir);
    assert_int_equal(pk_socket_bind_secure(s, ipc, NULL, NULL, 0, NULL, 0, &err), PK_OK);
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
    assert_int_equal(pk_socket_bind_secure(router, "tcp://127.0.0.1:*", cs, PK_CURVE_DOMAIN_CLIENTS,
                                           0, tcp, sizeof tcp, &err),
                     PK_OK);
    snprintf(ipc, sizeof ipc, "ipc://%s/plain.sock", dir);
    assert_int_equal(
        pk_socket_bind_secure(router, ipc, cs, PK_CURVE_DOMAIN_CLIENTS, 0, NULL, 0, &err), PK_OK);

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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loopback),
        cmocka_unit_test(test_key_files),
        cmocka_unit_test(test_bind_refusals),
        cmocka_unit_test(test_zap_admits_allowed_keys_only),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
