/* Issue 27, finding 1: no client can abort the server through routing ids, whatever it sets.
 *
 * libzmq 4.3.4's ROUTER names a peer that sends no routing id 0x00 + a 32-bit counter and, when
 * that id is already held by a peer that chose it, asserts in add_out_pipe (SIGABRT). The
 * counter starts at rand()'s next two values; main seeded rand() from getrandom, so the attack
 * was only improbable, never impossible. Here getrandom is made predictable (the link wraps it:
 * every 4-byte request, the size of the seed, gets SEED), so the next counter is known, as it is
 * to an attacker who learns or guesses the seed:
 *
 * - test_old_router_aborts: the old path (a ROUTER from pk_router_socket_new, as every plain
 *   endpoint had) in a child process; peers claim the ids around the predicted counter, then
 *   anonymous peers connect: the child dies of SIGABRT. This shows the attack is real.
 * - test_server_survives: the same attack against the whole server (pk_server, as `pkgym
 *   serve` runs it) on a plain ipc:// endpoint: on main it aborted; now the plain endpoint is a
 *   ZMQ_STREAM socket (pk_zmtp_front.h) whose peers cannot name themselves, and everyone is
 *   answered, the server alive until SIGTERM, then exiting 0.
 * - test_worker_endpoint_survives: the same against the broker's plain worker endpoint
 *   (`--worker-bind ipc://...`), now a ZMTP front too. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <zmq.h>

#include "pk_curve.h"
#include "server.h"

#define SEED 0x2a2a2a2au
#define CLAIMS 64    /* ids claimed from the predicted counter on */
#define ANONYMOUS 16 /* anonymous peers after them */

ssize_t __real_getrandom(void *buf, size_t len, unsigned flags);
ssize_t __wrap_getrandom(void *buf, size_t len, unsigned flags);

/* The seed pk_router_socket_new draws (4 bytes) is SEED; other requests are real. */
ssize_t __wrap_getrandom(void *buf, size_t len, unsigned flags) {
    if (len == sizeof(unsigned)) {
        unsigned seed = SEED;
        memcpy(buf, &seed, sizeof seed);
        return (ssize_t)len;
    }
    return __real_getrandom(buf, len, flags);
}

/* The counter libzmq's ROUTER starts at after srand(SEED) (src/random.cpp, generate_random). */
static uint32_t predicted_counter(void) {
    srand(SEED);
    uint32_t low = (uint32_t)rand(), high = (uint32_t)rand();
    return (high << (sizeof(int) * 8 - 1)) | low;
}

static char dir[64], endpoint[128], worker_endpoint[128];

static int setup(void **state) {
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/pk-test-routing-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    snprintf(endpoint, sizeof endpoint, "ipc://%s/server", dir);
    snprintf(worker_endpoint, sizeof worker_endpoint, "ipc://%s/workers", dir);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    return pk_rm_rf(dir);
}

static const uint8_t hello[] = {0x81, 0xa2, 'o', 'p', 0xa5, 'h', 'e', 'l', 'l', 'o'};

static void *peer_at(void *ctx, const char *ep, const void *id, size_t id_len) {
    void *s = zmq_socket(ctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
    if (id)
        zmq_setsockopt(s, ZMQ_ROUTING_ID, id, id_len);
    zmq_connect(s, ep);
    return s;
}

static void *peer(void *ctx, const void *id, size_t id_len) {
    return peer_at(ctx, endpoint, id, id_len);
}

/* Sends hello; 1 when a reply came within timeout_ms. */
static int ask(void *s, int timeout_ms) {
    if (zmq_send(s, hello, sizeof hello, 0) < 0)
        return 0;
    zmq_pollitem_t it = {s, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&it, 1, timeout_ms) <= 0)
        return 0;
    char buf[65536];
    return zmq_recv(s, buf, sizeof buf, 0) >= 0;
}

/* Whether the child is still running; *status gets its status once it has exited. */
static int alive(pid_t pid, int *status) {
    return waitpid(pid, status, WNOHANG) == 0;
}

/* The attack: peers holding 0x00 + (counter + k), then anonymous peers. Returns how many of
 * the anonymous peers were answered; stops early when the child has died. */
static int attack(pid_t pid, int *status) {
    void *ctx = zmq_ctx_new();
    void *held[CLAIMS];
    uint32_t c0 = predicted_counter();
    int answered = 0, n_held = 0;
    for (int k = 0; k < CLAIMS && alive(pid, status); k++) {
        uint32_t v = c0 + (uint32_t)k;
        uint8_t id[5] = {0, (uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
        held[n_held] = peer(ctx, id, sizeof id);
        /* Answered: its id is attached before the anonymous peers come. */
        assert_true(ask(held[n_held++], 10000));
    }
    for (int i = 0; i < ANONYMOUS && alive(pid, status); i++) {
        void *s = peer(ctx, NULL, 0);
        answered += ask(s, 3000);
        zmq_close(s);
    }
    for (int i = 0; i < n_held; i++)
        zmq_close(held[i]);
    zmq_ctx_term(ctx);
    return answered;
}

static int wait_exit(pid_t pid, int *status, int ms) {
    for (int waited = 0; waited < ms; waited += 10) {
        if (waitpid(pid, status, WNOHANG) == pid)
            return 1;
        usleep(10000);
    }
    return 0;
}

/* The old path: a ROUTER as every plain endpoint had it, answering each request. */
static void old_router_child(void) {
    void *ctx = zmq_ctx_new();
    void *r = pk_router_socket_new(ctx);
    if (!r || zmq_bind(r, endpoint) != 0)
        _exit(3);
    for (;;) {
        zmq_msg_t id, body;
        zmq_msg_init(&id);
        zmq_msg_init(&body);
        if (zmq_msg_recv(&id, r, 0) < 0 || zmq_msg_recv(&body, r, 0) < 0)
            _exit(4);
        zmq_msg_send(&id, r, ZMQ_SNDMORE);
        zmq_msg_send(&body, r, 0);
    }
}

static void test_old_router_aborts(void **state) {
    (void)state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        old_router_child();
    usleep(200000); /* bound before the peers connect (they would retry anyway) */
    int status = 0;
    int answered = attack(pid, &status);
    if (alive(pid, &status) && !wait_exit(pid, &status, 10000)) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        fail_msg("the old ROUTER survived: the predicted counter was wrong (%d answered)",
                 answered);
    }
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGABRT);
    assert_int_equal(answered, 0); /* the first anonymous peer got the claimed id */
}

static volatile sig_atomic_t stop_flag;

static void on_term(int sig) {
    (void)sig;
    stop_flag = 1;
}

/* The whole server, as `pkgym serve --gpus none --bind ipc://...` runs it; with_workers: and
 * `--worker-bind ipc://...` (the broker). */
static void server_child(int with_workers) {
    signal(SIGTERM, on_term);
    char data[128];
    snprintf(data, sizeof data, "%s/data", dir);
    pk_server_opts o;
    pk_server_opts_default(&o);
    o.binds[o.n_binds++] = endpoint;
    if (with_workers)
        o.worker_binds[o.n_worker_binds++] = worker_endpoint;
    o.data_dir = data;
    o.problems_dir = PK_TEST_PROBLEMS_DIR;
    o.modules_dir = PK_TEST_MODULES_DIR;
    o.n_gpus = 0;
    static pk_server s;
    pk_error err;
    pk_error_clear(&err);
    if (pk_server_init(&s, &o, &stop_flag, &err) != PK_OK) {
        fprintf(stderr, "server: %s\n", err.message);
        _exit(3);
    }
    int rc = pk_server_run(&s);
    pk_server_free(&s);
    _exit(rc == 0 ? 0 : 5);
}

/* Starts the server in a child; returns its pid once it answers. */
static pid_t start_server(int with_workers) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        server_child(with_workers);
    void *ctx = zmq_ctx_new();
    void *probe = peer(ctx, NULL, 0);
    int status = 0, up = 0;
    for (int i = 0; i < 60 && !up && alive(pid, &status); i++)
        up = ask(probe, 1000);
    zmq_close(probe);
    zmq_ctx_term(ctx);
    assert_true(up);
    return pid;
}

/* SIGTERM; it must exit 0. */
static void stop_server(pid_t pid) {
    int status = 0;
    kill(pid, SIGTERM);
    if (!wait_exit(pid, &status, 30000)) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        fail_msg("the server did not stop within 30 s of SIGTERM");
    }
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_server_survives(void **state) {
    (void)state;
    pid_t pid = start_server(0);
    int status = 0;
    int answered = attack(pid, &status);
    int still = alive(pid, &status);
    if (!still && WIFSIGNALED(status))
        fail_msg("the server died of signal %d (%s) under the attack", WTERMSIG(status),
                 strsignal(WTERMSIG(status)));
    assert_true(still);
    assert_int_equal(answered, ANONYMOUS);
    stop_server(pid);
}

/* The broker's plain worker endpoint: peers claiming the ids its ROUTER (seeded the same way)
 * would generate next, then anonymous peers; nothing needs an answer there, so the server is
 * asked on its client endpoint afterwards. Before: the broker's ROUTER aborted the server. */
static void test_worker_endpoint_survives(void **state) {
    (void)state;
    pid_t pid = start_server(1);
    void *ctx = zmq_ctx_new();
    void *held[CLAIMS], *anon[ANONYMOUS];
    uint32_t c0 = predicted_counter();
    for (int k = 0; k < CLAIMS; k++) {
        uint32_t v = c0 + (uint32_t)k;
        uint8_t id[5] = {0, (uint8_t)(v >> 24), (uint8_t)(v >> 16), (uint8_t)(v >> 8), (uint8_t)v};
        held[k] = peer_at(ctx, worker_endpoint, id, sizeof id);
    }
    usleep(500000); /* their handshakes done (on the old path: their ids held) */
    for (int i = 0; i < ANONYMOUS; i++)
        anon[i] = peer_at(ctx, worker_endpoint, NULL, 0);
    usleep(500000);
    int status = 0;
    if (!alive(pid, &status) && WIFSIGNALED(status))
        fail_msg("the server died of signal %d (%s) under the attack on its worker endpoint",
                 WTERMSIG(status), strsignal(WTERMSIG(status)));
    void *probe = peer(ctx, NULL, 0);
    assert_true(ask(probe, 10000));
    zmq_close(probe);
    for (int i = 0; i < CLAIMS; i++)
        zmq_close(held[i]);
    for (int i = 0; i < ANONYMOUS; i++)
        zmq_close(anon[i]);
    zmq_ctx_term(ctx);
    stop_server(pid);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_old_router_aborts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_server_survives, setup, teardown),
        cmocka_unit_test_setup_teardown(test_worker_endpoint_survives, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
