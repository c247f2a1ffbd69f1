/* libFuzzer target: the whole server loop (issue 27). One pk_server, built once, serves an
 * inproc:// endpoint (the ROUTER) and a plain ipc:// one (the ZMTP front, pk_zmtp_front.h:
 * issue 27, finding 1); each input is a script of clients and messages:
 *
 *   0 P N (L16 BYTES){N}  peer P sends N frames (multi-frame envelopes, empty delimiters, junk)
 *   1 L BYTES{L}          a new peer connects with routing id BYTES (L 0: anonymous, left to the
 *                         ROUTER), as a client that picks its own id would (issue 27, finding 1)
 *   2 P O K (L16 BYTES)   peer P sends a well-formed request: op O (every op, unknown ones too),
 *                         the last episode id a reply named, problem K, the bytes as the action
 *   3                     one round of the server loop (pk_server_poll_once), replies drained
 *                         (skipped when nothing was sent since the last round)
 *
 * P picks one of the ZeroMQ peers of the inproc endpoint or one of two raw connections to the
 * ipc endpoint, which speak ZMTP 3.1 themselves (a DEALER and a REQ: greeting, READY, frames
 * with MORE flags and 1- or 8-byte sizes; the REQ adds its delimiter), reconnecting when the
 * server closes them; their bytes reach the front through libzmq's I/O thread, so a round may
 * see them later. Steps complete at once through fuzz_evaluator.c. The server must answer, never
 * abort, leak nor read out of bounds (ASan, UBSan); after the script the loop runs until it is
 * quiet. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <msgpack.h>
#include <zmq.h>

#include "server.h"

#define MAX_PEERS 6
#define FIXED_PEERS 3
#define RAW_PEERS 2 /* raw ZMTP connections to the front: a DEALER and a REQ */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static pk_server server;
static volatile sig_atomic_t stop_flag;
static void *peers[MAX_PEERS];
static int n_peers;
static char last_episode[257];
static const char *endpoint = "inproc://pkgym-fuzz-server";
static char front_path[100];
static int raw_fd[RAW_PEERS] = {-1, -1};
static int raw_in_message[RAW_PEERS]; /* a frame with MORE went: the REQ's delimiter went too */

/* Writes without waiting; 0 when the kernel took all of it. */
static int raw_write(int k, const void *p, size_t n) {
    if (raw_fd[k] < 0)
        return -1;
    return n == 0 || send(raw_fd[k], p, n, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)n ? 0 : -1;
}

/* A raw connection: greeting and READY as libzmq's DEALER (k 0) or REQ (k 1) sends them. */
static void raw_connect(int k) {
    if (raw_fd[k] >= 0)
        close(raw_fd[k]);
    raw_in_message[k] = 0;
    raw_fd[k] = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", front_path);
    if (raw_fd[k] < 0 || connect(raw_fd[k], (struct sockaddr *)&sa, sizeof sa) != 0) {
        if (raw_fd[k] >= 0)
            close(raw_fd[k]);
        raw_fd[k] = -1;
        return;
    }
    static const uint8_t greeting[64] = {0xFF, 0,    0, 0, 0,   0,   0,   0,
                                         1,    0x7F, 3, 1, 'N', 'U', 'L', 'L'};
    const char *type = k ? "REQ" : "DEALER";
    uint8_t ready[64];
    size_t tl = strlen(type), n = 0;
    ready[n++] = 0x04;
    ready[n++] = (uint8_t)(1 + 5 + 1 + 11 + 4 + tl);
    ready[n++] = 5;
    memcpy(ready + n, "READY", 5);
    n += 5;
    ready[n++] = 11;
    memcpy(ready + n, "Socket-Type", 11);
    n += 11;
    ready[n++] = 0;
    ready[n++] = 0;
    ready[n++] = 0;
    ready[n++] = (uint8_t)tl;
    memcpy(ready + n, type, tl);
    n += tl;
    if (raw_write(k, greeting, sizeof greeting) != 0 || raw_write(k, ready, n) != 0) {
        close(raw_fd[k]);
        raw_fd[k] = -1; /* raw_drain tries again */
    }
}

/* One frame from raw peer k; long_size: the 8-byte size even when short. A write the kernel
 * does not take whole (a full buffer) would break the stream: the connection starts again. */
static void raw_frame(int k, const void *p, size_t n, int more, int long_size) {
    int bad = 0;
    if (k == 1 && !raw_in_message[k]) {
        static const uint8_t delimiter[2] = {0x01, 0};
        bad = raw_write(k, delimiter, sizeof delimiter);
    }
    uint8_t h[9];
    size_t hl;
    if (n > 255 || long_size) {
        h[0] = (uint8_t)(more ? 0x03 : 0x02);
        uint64_t v = n;
        for (int i = 8; i >= 1; i--, v >>= 8)
            h[i] = (uint8_t)v;
        hl = 9;
    } else {
        h[0] = (uint8_t)(more ? 0x01 : 0x00);
        h[1] = (uint8_t)n;
        hl = 2;
    }
    bad = bad || raw_write(k, h, hl) || raw_write(k, p, n);
    raw_in_message[k] = more;
    if (bad)
        raw_connect(k);
}

/* Replies to the raw peers are read and dropped; a closed one connects again. */
static void raw_drain(void) {
    for (int k = 0; k < RAW_PEERS; k++) {
        uint8_t buf[65536];
        ssize_t got;
        while (raw_fd[k] >= 0 && (got = recv(raw_fd[k], buf, sizeof buf, MSG_DONTWAIT)) > 0)
            ;
        if (raw_fd[k] < 0 || got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
            raw_connect(k);
    }
}
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
    static char front_endpoint[128];
    snprintf(front_path, sizeof front_path, "%s/front.sock", data_dir);
    snprintf(front_endpoint, sizeof front_endpoint, "ipc://%s", front_path);
    o.binds[o.n_binds++] = front_endpoint;
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
    for (int k = 0; k < RAW_PEERS; k++)
        raw_connect(k);
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
    raw_drain();
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

/* Sends a frame from peer p: the ZeroMQ peers first, then the raw ones. */
static void peer_send(unsigned p, const void *bytes, size_t len, int more, int long_size) {
    if (p < (unsigned)n_peers)
        zmq_send(peers[p], bytes, len, (more ? ZMQ_SNDMORE : 0) | ZMQ_DONTWAIT);
    else
        raw_frame((int)(p - (unsigned)n_peers) % RAW_PEERS, bytes, len, more, long_size);
}

static void send_request(unsigned peer, unsigned op, unsigned problem, const uint8_t *action,
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
    peer_send(peer, sb.data, sb.size, 0, (op & 0x80) != 0);
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
            unsigned peer = take(&r) % (unsigned)(n_peers + RAW_PEERS);
            unsigned n = take(&r) % 6;
            for (unsigned i = 0; i < n; i++) {
                size_t want = take(&r) | take(&r) << 8;
                const uint8_t *bytes;
                size_t len = take_bytes(&r, want, &bytes);
                peer_send(peer, bytes, len, i + 1 < n, (want & 0x8000) != 0);
            }
            sent = 1;
        } else if (cmd == 1 && n_peers < MAX_PEERS) {
            const uint8_t *id;
            size_t len = take_bytes(&r, take(&r), &id);
            void *p = new_peer(id, len);
            if (p)
                peers[n_peers++] = p;
        } else if (cmd == 2) {
            unsigned peer = take(&r) % (unsigned)(n_peers + RAW_PEERS);
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
