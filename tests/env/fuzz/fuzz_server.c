/* libFuzzer target: the whole server loop (issue 27). One pk_server, built once, serves an
 * inproc:// endpoint; each input is a script of clients and messages:
 *
 *   0 P N (L16 BYTES){N}  peer P sends N frames (multi-frame envelopes, empty delimiters, junk)
 *   1 L BYTES{L}          a new peer connects with routing id BYTES (L 0: anonymous, left to the
 *                         ROUTER), as a client that picks its own id would (issue 27, finding 1)
 *   2 P O K (L16 BYTES)   peer P sends a well-formed request: op O (every op, unknown ones too),
 *                         the last episode id a reply named, problem K, the bytes as the action
 *   3                     one round of the server loop (pk_server_poll_once), replies drained
 *                         (skipped when nothing was sent since the last round)
 *
 * Steps complete at once through fuzz_evaluator.c. The server must answer, never abort, leak
 * nor read out of bounds (ASan, UBSan); after the script the loop runs until it is quiet. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <msgpack.h>
#include <zmq.h>

#include "server.h"

#define MAX_PEERS 6
#define FIXED_PEERS 3

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static pk_server server;
static volatile sig_atomic_t stop_flag;
static void *peers[MAX_PEERS];
static int n_peers;
static char last_episode[257];
static const char *endpoint = "inproc://pkgym-fuzz-server";
static const char *const op_names[] = {"hello", "list_problems", "get_problem", "reset", "step",
                                       "close", "trajectory",    "stats",       "",      "nope"};

static void *new_peer(const void *id, size_t len) {
    void *p = zmq_socket(server.zctx, ZMQ_DEALER);
    int zero = 0;
    zmq_setsockopt(p, ZMQ_LINGER, &zero, sizeof zero);
    if (len > 0)
        zmq_setsockopt(p, ZMQ_ROUTING_ID, id, len);
    if (zmq_connect(p, endpoint) != 0) {
        zmq_close(p);
        return NULL;
    }
    return p;
}

static int init(void) {
    /* In memory when it can be: a store commit per reset and step would wait on the disk. */
    char dir[64];
    snprintf(dir, sizeof dir, "%s/pkgym-fuzz-server-XXXXXX",
             access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
    if (!mkdtemp(dir))
        return -1;
    static char data_dir[64];
    snprintf(data_dir, sizeof data_dir, "%s", dir);
    pk_server_opts o;
    pk_server_opts_default(&o);
    o.binds[o.n_binds++] = endpoint;
    o.data_dir = data_dir;
    o.modules_dir = PK_FUZZ_MODULES_DIR;
    o.problems_dir = PK_FUZZ_PROBLEMS_DIR;
    o.max_episodes = 64;
    o.max_client_episodes = 16;
    o.episode_idle_s = 2;
    o.max_action_bytes = 1 << 16;
    o.n_gpus = 0;
    pk_error err;
    pk_error_clear(&err);
    if (pk_server_init(&server, &o, &stop_flag, &err) != PK_OK) {
        fprintf(stderr, "fuzz_server: %s\n", err.message);
        return -1;
    }
    static const char named[] = "fuzz-fixed";
    peers[n_peers++] = new_peer(NULL, 0);
    peers[n_peers++] = new_peer(named, sizeof named - 1);
    peers[n_peers++] = new_peer("\0\0\0\0\1", 5);
    return 0;
}

/* Remembers the episode id a reply names, so that later requests reach an open episode. */
static void note_reply(const void *data, size_t len) {
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    if (msgpack_unpack_next(&u, data, len, NULL) == MSGPACK_UNPACK_SUCCESS &&
        u.data.type == MSGPACK_OBJECT_MAP) {
        for (uint32_t i = 0; i < u.data.via.map.size; i++) {
            const msgpack_object *k = &u.data.via.map.ptr[i].key, *v = &u.data.via.map.ptr[i].val;
            if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == 7 &&
                memcmp(k->via.str.ptr, "episode", 7) == 0 && v->type == MSGPACK_OBJECT_STR &&
                v->via.str.size < sizeof last_episode) {
                memcpy(last_episode, v->via.str.ptr, v->via.str.size);
                last_episode[v->via.str.size] = '\0';
            }
        }
    }
    msgpack_unpacked_destroy(&u);
}

static void drain(void) {
    for (int i = 0; i < n_peers; i++) {
        zmq_msg_t m;
        zmq_msg_init(&m);
        while (zmq_msg_recv(&m, peers[i], ZMQ_DONTWAIT) >= 0)
            if (!zmq_msg_more(&m))
                note_reply(zmq_msg_data(&m), zmq_msg_size(&m));
        zmq_msg_close(&m);
    }
}

static int pump(void) {
    int n = pk_server_poll_once(&server, 0);
    drain();
    return n;
}

typedef struct reader {
    const uint8_t *p;
    size_t left;
} reader;

static unsigned take(reader *r) {
    if (!r->left)
        return 0;
    r->left--;
    return *r->p++;
}

static size_t take_bytes(reader *r, size_t want, const uint8_t **out) {
    size_t n = want < r->left ? want : r->left;
    *out = r->p;
    r->p += n;
    r->left -= n;
    return n;
}

static void send_request(void *peer, unsigned op, unsigned problem, const uint8_t *action,
                         size_t action_len) {
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    const char *name = op_names[op % (sizeof op_names / sizeof *op_names)];
    const pk_problem *p =
        pk_problem_set_at(server.problems, problem % (pk_problem_set_count(server.problems) + 1));
    const char *pid = p ? pk_problem_id(p) : "no/such-problem";
    msgpack_pack_map(&pk, 6);
    msgpack_pack_str_with_body(&pk, "op", 2);
    msgpack_pack_str_with_body(&pk, name, strlen(name));
    msgpack_pack_str_with_body(&pk, "id", 2);
    msgpack_pack_uint32(&pk, op * 256 + problem);
    msgpack_pack_str_with_body(&pk, "problem", 7);
    msgpack_pack_str_with_body(&pk, pid, strlen(pid));
    msgpack_pack_str_with_body(&pk, "episode", 7);
    msgpack_pack_str_with_body(&pk, last_episode, strlen(last_episode));
    msgpack_pack_str_with_body(&pk, "action", 6);
    msgpack_pack_str_with_body(&pk, action, action_len);
    msgpack_pack_str_with_body(&pk, "max_turns", 9);
    msgpack_pack_int(&pk, (int)(problem % 5));
    zmq_send(peer, sb.data, sb.size, ZMQ_DONTWAIT);
    msgpack_sbuffer_destroy(&sb);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int ready = -1;
    if (ready < 0)
        ready = init();
    if (ready != 0)
        abort(); /* the harness itself could not start: not a finding of the server */
    reader r = {data, size};
    int sent = 0;
    while (r.left) {
        unsigned cmd = take(&r) % 4;
        if (cmd == 0) {
            void *peer = peers[take(&r) % n_peers];
            unsigned n = take(&r) % 6;
            for (unsigned i = 0; i < n; i++) {
                size_t want = take(&r) | take(&r) << 8;
                const uint8_t *bytes;
                size_t len = take_bytes(&r, want, &bytes);
                zmq_send(peer, bytes, len, (i + 1 < n ? ZMQ_SNDMORE : 0) | ZMQ_DONTWAIT);
            }
            sent = 1;
        } else if (cmd == 1 && n_peers < MAX_PEERS) {
            const uint8_t *id;
            size_t len = take_bytes(&r, take(&r), &id);
            void *p = new_peer(id, len);
            if (p)
                peers[n_peers++] = p;
        } else if (cmd == 2) {
            void *peer = peers[take(&r) % n_peers];
            unsigned op = take(&r), problem = take(&r);
            size_t want = take(&r) | take(&r) << 8;
            const uint8_t *action;
            size_t len = take_bytes(&r, want, &action);
            send_request(peer, op, problem, action, len);
            sent = 1;
        } else if (cmd == 3 && sent) {
            pump(); /* a round with nothing sent since the last would only repeat it */
            sent = 0;
        }
    }
    /* Until quiet: replies, completions and store commits of this input are handled now. */
    for (int i = 0; i < 8 && pump() > 0; i++)
        ;
    while (n_peers > FIXED_PEERS)
        zmq_close(peers[--n_peers]);
    return 0;
}
