/* pk_zmtp_probe_mechanism (rollout/src/remote/pk_zmtp_probe.h): the mechanism of a libzmq
 * ROUTER with CURVE and of one without, over tcp:// and ipc://; a closed port, a peer that says
 * nothing, a peer that is not ZeroMQ and endpoints it cannot probe are errors, each named. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cmocka.h>
#include <zmq.h>

#include "pk_zmtp_probe.h"

/* A ROUTER bound to bind_ep, with CURVE when curve is set; *ep gets the address it bound. */
static void *router(void *ctx, const char *bind_ep, int curve, char *ep, size_t cap) {
    void *s = zmq_socket(ctx, ZMQ_ROUTER);
    assert_non_null(s);
    int zero = 0;
    assert_int_equal(zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero), 0);
    if (curve) {
        char pub[41], sec[41];
        int one = 1;
        assert_int_equal(zmq_curve_keypair(pub, sec), 0);
        assert_int_equal(zmq_setsockopt(s, ZMQ_CURVE_SERVER, &one, sizeof one), 0);
        assert_int_equal(zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, sec, 40), 0);
    }
    assert_int_equal(zmq_bind(s, bind_ep), 0);
    assert_int_equal(zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, ep, &cap), 0);
    return s;
}

/* A listening TCP socket on 127.0.0.1 and its endpoint. */
static int listener(char *ep, size_t cap) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(fd, 4), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
    snprintf(ep, cap, "tcp://127.0.0.1:%d", ntohs(a.sin_port));
    return fd;
}

static void libzmq_mechanisms(void **state) {
    (void)state;
    void *ctx = zmq_ctx_new();
    char ep[256], mechanism[21], dir[] = "/tmp/pk-zmtp-probe-XXXXXX", ipc[300];
    pk_error err;
    void *curve = router(ctx, "tcp://127.0.0.1:*", 1, ep, sizeof ep);
    /* Many times: the probe must not depend on timing (a full greeting did). */
    for (int i = 0; i < 50; i++) {
        if (pk_zmtp_probe_mechanism(ep, 2000, mechanism, &err) != PK_OK)
            fail_msg("probe %d: %s", i, err.message);
        assert_string_equal(mechanism, "CURVE");
    }
    zmq_close(curve);
    assert_non_null(mkdtemp(dir));
    snprintf(ipc, sizeof ipc, "ipc://%s/s.sock", dir);
    void *plain = router(ctx, ipc, 0, ep, sizeof ep);
    assert_int_equal(pk_zmtp_probe_mechanism(ep, 2000, mechanism, &err), PK_OK);
    assert_string_equal(mechanism, "NULL");
    zmq_close(plain);
    zmq_ctx_term(ctx);
    snprintf(ipc, sizeof ipc, "%s/s.sock", dir);
    unlink(ipc);
    rmdir(dir);
}

static void errors_named(void **state) {
    (void)state;
    char ep[64], mechanism[21];
    pk_error err;
    /* A port nobody listens on any more. */
    int fd = listener(ep, sizeof ep);
    close(fd);
    assert_int_equal(pk_zmtp_probe_mechanism(ep, 1000, mechanism, &err), PK_ERR_IO);
    assert_non_null(strstr(err.message, "connect"));
    assert_string_equal(mechanism, "");
    /* A peer that accepts (the kernel's backlog) and says nothing: a timeout, on time. */
    fd = listener(ep, sizeof ep);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(pk_zmtp_probe_mechanism(ep, 200, mechanism, &err), PK_ERR_TIMEOUT);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const double ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
    assert_true(ms >= 150 && ms < 5000);
    assert_non_null(strstr(err.message, "no ZMTP greeting"));
    close(fd);
    /* A peer that is not ZeroMQ (an HTTP server's answer), then one that hangs up. */
    fd = listener(ep, sizeof ep);
    static const char http[] = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
    for (int kind = 0; kind < 2; kind++) {
        pid_t child = fork();
        assert_true(child >= 0);
        if (child == 0) {
            int c = accept(fd, NULL, NULL);
            if (kind == 0 && c >= 0 && write(c, http, sizeof http - 1) != (ssize_t)sizeof http - 1)
                _exit(1);
            sleep(kind == 0 ? 1 : 0);
            _exit(0);
        }
        const int rc = pk_zmtp_probe_mechanism(ep, 3000, mechanism, &err);
        int status;
        assert_int_equal(waitpid(child, &status, 0), child);
        assert_int_equal(rc, kind == 0 ? PK_ERR_INVALID : PK_ERR_IO);
        if (!strstr(err.message, kind == 0 ? "no ZMTP 3 greeting" : "closed the connection after"))
            fail_msg("kind %d: %s", kind, err.message);
    }
    close(fd);
    /* Endpoints it cannot probe. */
    assert_int_equal(pk_zmtp_probe_mechanism("inproc://x", 100, mechanism, &err),
                     PK_ERR_UNSUPPORTED);
    assert_int_equal(pk_zmtp_probe_mechanism("tcp://no-port", 100, mechanism, &err),
                     PK_ERR_INVALID);
    assert_int_equal(pk_zmtp_probe_mechanism("tcp://127.0.0.1:", 100, mechanism, &err),
                     PK_ERR_INVALID);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(libzmq_mechanisms),
        cmocka_unit_test(errors_named),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
