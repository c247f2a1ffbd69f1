/* ZMTP over a ZMQ_STREAM socket, peers named by the server (pk_zmtp_front.h). */
#include "pk_zmtp_front.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "pk_splitmix.h"
#include "pk_zmtp.h"

#define NONE UINT32_MAX
#define RID_MAX 256           /* STREAM's ids are 5 bytes; ZeroMQ's are at most 255 */
#define ERROR_GRACE_MS 200.0  /* an ERROR command leaves before its connection is closed */
#define MAX_EVENTS (1u << 20) /* connection events not taken: beyond, the oldest ones stay */
#define HANDSHAKE_MS 30000.0  /* as libzmq's ZMQ_HANDSHAKE_IVL: greeting and READY within it */
#define SCAN_MS 50.0          /* how often pk_zmtp_front_tick looks at every connection */

typedef struct fconn {
    int used;
    int closing; /* an ERROR was sent: closed at close_at_ms, its bytes ignored */
    int listed;  /* on the ready queue */
    double close_at_ms;
    double opened_ms;
    uint8_t rid[RID_MAX]; /* the STREAM socket's id of the connection */
    size_t rid_len;
    uint8_t peer[PK_ZMTP_PEER_ID_LEN]; /* the server's name for the peer */
    pk_zmtp_conn z;
    uint8_t *in; /* bytes received and not parsed yet */
    size_t in_len, in_cap;
    zmq_msg_t parts[PK_ZMTP_FRONT_MAX_PARTS]; /* the message being received */
    int n_parts;
    uint32_t next_rid, next_peer, next_free; /* hash chains, free list */
} fconn;

struct pk_zmtp_front {
    void *sock;
    size_t max_message;
    fconn *conns;
    uint32_t n_conns, cap_conns, n_open, free_head;
    uint32_t *rid_heads, *peer_heads, n_buckets;
    uint32_t *ready; /* ring of slots whose buffered bytes may hold a message */
    uint32_t ready_head, ready_len;
    zmq_msg_t out[PK_ZMTP_FRONT_MAX_PARTS + 1]; /* the message being handed out */
    int out_n, out_i;
    uint32_t out_conn;
    pk_zmtp_conn_event *events;
    size_t ev_head, ev_len, ev_cap;
    pk_zmtp_front_counts counts;
    uint64_t fallback_counter;
    double handshake_ms, next_scan_ms;
};

static uint32_t hash_bytes(const uint8_t *p, size_t n) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return (uint32_t)(h ^ (h >> 32));
}

static uint32_t *rid_bucket(pk_zmtp_front *f, const uint8_t *rid, size_t len) {
    return &f->rid_heads[hash_bytes(rid, len) & (f->n_buckets - 1)];
}

static uint32_t *peer_bucket(pk_zmtp_front *f, const uint8_t *peer) {
    return &f->peer_heads[hash_bytes(peer, PK_ZMTP_PEER_ID_LEN) & (f->n_buckets - 1)];
}

static uint32_t find_rid(pk_zmtp_front *f, const uint8_t *rid, size_t len) {
    for (uint32_t i = *rid_bucket(f, rid, len); i != NONE; i = f->conns[i].next_rid)
        if (f->conns[i].rid_len == len && memcmp(f->conns[i].rid, rid, len) == 0)
            return i;
    return NONE;
}

static uint32_t find_peer(pk_zmtp_front *f, const uint8_t *peer, size_t len) {
    if (len != PK_ZMTP_PEER_ID_LEN)
        return NONE;
    for (uint32_t i = *peer_bucket(f, peer); i != NONE; i = f->conns[i].next_peer)
        if (memcmp(f->conns[i].peer, peer, PK_ZMTP_PEER_ID_LEN) == 0)
            return i;
    return NONE;
}

/* The hash indexes over the open connections, rebuilt for n_buckets. */
static int reindex(pk_zmtp_front *f, uint32_t n_buckets) {
    uint32_t *r = malloc(n_buckets * sizeof *r), *p = malloc(n_buckets * sizeof *p);
    if (!r || !p) {
        free(r);
        free(p);
        return -1;
    }
    free(f->rid_heads);
    free(f->peer_heads);
    f->rid_heads = r;
    f->peer_heads = p;
    f->n_buckets = n_buckets;
    for (uint32_t i = 0; i < n_buckets; i++)
        r[i] = p[i] = NONE;
    for (uint32_t i = 0; i < f->n_conns; i++) {
        fconn *c = &f->conns[i];
        if (!c->used)
            continue;
        uint32_t *rb = rid_bucket(f, c->rid, c->rid_len), *pb = peer_bucket(f, c->peer);
        c->next_rid = *rb;
        *rb = i;
        c->next_peer = *pb;
        *pb = i;
    }
    return 0;
}

static void unlink_chain(pk_zmtp_front *f, uint32_t *head, uint32_t slot, int by_rid) {
    for (uint32_t *p = head; *p != NONE;
         p = by_rid ? &f->conns[*p].next_rid : &f->conns[*p].next_peer) {
        if (*p == slot) {
            *p = by_rid ? f->conns[slot].next_rid : f->conns[slot].next_peer;
            return;
        }
    }
}

static void push_event(pk_zmtp_front *f, uint32_t conn, int open) {
    if (f->ev_len == f->ev_cap) {
        if (f->ev_cap >= MAX_EVENTS)
            return;
        size_t cap = f->ev_cap ? f->ev_cap * 2 : 64;
        pk_zmtp_conn_event *e = malloc(cap * sizeof *e);
        if (!e)
            return; /* presence then misses this connection: it stays "unknown", never gone */
        for (size_t i = 0; i < f->ev_len; i++)
            e[i] = f->events[(f->ev_head + i) % f->ev_cap];
        free(f->events);
        f->events = e;
        f->ev_cap = cap;
        f->ev_head = 0;
    }
    f->events[(f->ev_head + f->ev_len++) % f->ev_cap] = (pk_zmtp_conn_event){conn, open};
}

static void new_peer_id(pk_zmtp_front *f, uint8_t out[PK_ZMTP_PEER_ID_LEN]) {
    if (getrandom(out, PK_ZMTP_PEER_ID_LEN, 0) != PK_ZMTP_PEER_ID_LEN)
        memset(out, 0, PK_ZMTP_PEER_ID_LEN); /* no getrandom (Linux < 3.17): the mix below */
    for (;;) {
        out[0] |= 0x80; /* never 0x00, the first byte of the ids libzmq generates */
        if (find_peer(f, out, PK_ZMTP_PEER_ID_LEN) == NONE)
            return;
        /* Taken (or no randomness): unique all the same, though less secret. */
        for (int i = 0; i < PK_ZMTP_PEER_ID_LEN; i += 8) {
            uint64_t v = pk_splitmix64(++f->fallback_counter ^ (uint64_t)(pk_now_ms() * 1e3)), w;
            memcpy(&w, out + i, 8);
            w ^= v;
            memcpy(out + i, &w, 8);
        }
    }
}

/* Sends raw bytes on connection c. 0: sent; 1: dropped (queue full); -1: the connection is
 * gone (or no memory). */
static int raw_send(pk_zmtp_front *f, const fconn *c, const void *data, size_t len) {
    if (zmq_send(f->sock, c->rid, c->rid_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0)
        return zmq_errno() == EAGAIN ? 1 : -1;
    /* The routing id was accepted: the data frame goes to a pipe with room. */
    return zmq_send(f->sock, data, len, ZMQ_DONTWAIT) < 0 ? -1 : 0;
}

/* An empty message closes a STREAM socket's connection. */
static void hang_up(pk_zmtp_front *f, const uint8_t *rid, size_t rid_len) {
    if (zmq_send(f->sock, rid, rid_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0)
        zmq_send(f->sock, "", 0, ZMQ_DONTWAIT);
}

static void drop_parts(fconn *c) {
    for (int i = 0; i < c->n_parts; i++)
        zmq_msg_close(&c->parts[i]);
    c->n_parts = 0;
}

/* Forgets connection slot; hangup: tell the STREAM socket to close it. */
static void release(pk_zmtp_front *f, uint32_t slot, int hangup) {
    fconn *c = &f->conns[slot];
    if (c->listed) { /* off the ready queue: the slot may be reused */
        uint32_t k = 0;
        for (uint32_t i = 0; i < f->ready_len; i++) {
            uint32_t s = f->ready[(f->ready_head + i) % f->cap_conns];
            if (s != slot)
                f->ready[(f->ready_head + k++) % f->cap_conns] = s;
        }
        f->ready_len = k;
    }
    if (hangup)
        hang_up(f, c->rid, c->rid_len);
    unlink_chain(f, rid_bucket(f, c->rid, c->rid_len), slot, 1);
    unlink_chain(f, peer_bucket(f, c->peer), slot, 0);
    drop_parts(c);
    free(c->in);
    memset(c, 0, sizeof *c);
    c->next_free = f->free_head;
    f->free_head = slot;
    f->n_open--;
    push_event(f, slot, 0);
}

/* A connection the server refuses: with an ERROR command first when the peer can read one. */
static void refuse(pk_zmtp_front *f, uint32_t slot, const pk_zmtp_event *ev) {
    fconn *c = &f->conns[slot];
    f->counts.refused++;
    if (ev->send_error) {
        uint8_t buf[300];
        size_t n = pk_zmtp_encode_error(buf, sizeof buf, ev->reason);
        if (n && raw_send(f, c, buf, n) == 0) {
            c->closing = 1;
            c->close_at_ms = pk_now_ms() + ERROR_GRACE_MS;
            c->in_len = 0;
            drop_parts(c);
            return;
        }
    }
    release(f, slot, 1);
}

static uint32_t add_conn(pk_zmtp_front *f, const uint8_t *rid, size_t rid_len) {
    /* More buckets first, while every slot below n_conns is a whole entry. On failure the old
     * buckets stay: only longer chains. */
    if (f->n_open + 1 > f->n_buckets)
        reindex(f, f->n_buckets * 2);
    uint32_t slot = f->free_head;
    if (slot == NONE) {
        if (f->n_conns == f->cap_conns) {
            uint32_t cap = f->cap_conns ? f->cap_conns * 2 : 64;
            fconn *nc = realloc(f->conns, cap * sizeof *nc);
            uint32_t *nr = nc ? malloc(cap * sizeof *nr) : NULL;
            if (!nr) {
                if (nc)
                    f->conns = nc; /* realloc moved it; the old pointer is gone */
                return NONE;
            }
            for (uint32_t i = 0; i < f->ready_len; i++)
                nr[i] = f->ready[(f->ready_head + i) % f->cap_conns];
            free(f->ready);
            f->ready = nr;
            f->ready_head = 0;
            f->conns = nc;
            f->cap_conns = cap;
        }
        slot = f->n_conns++;
    } else {
        f->free_head = f->conns[slot].next_free;
    }
    fconn *c = &f->conns[slot];
    memset(c, 0, sizeof *c);
    c->used = 1;
    memcpy(c->rid, rid, rid_len);
    c->rid_len = rid_len;
    c->opened_ms = pk_now_ms();
    new_peer_id(f, c->peer);
    pk_zmtp_conn_init(&c->z, f->max_message);
    f->n_open++;
    uint32_t *rb = rid_bucket(f, c->rid, c->rid_len), *pb = peer_bucket(f, c->peer);
    c->next_rid = *rb;
    *rb = slot;
    c->next_peer = *pb;
    *pb = slot;
    return slot;
}

/* A connection the STREAM socket reports: greeted at once (ZMTP lets the server speak first). */
static void open_conn(pk_zmtp_front *f, const uint8_t *rid, size_t rid_len) {
    uint32_t slot = add_conn(f, rid, rid_len);
    if (slot == NONE) {
        hang_up(f, rid, rid_len);
        return;
    }
    f->counts.accepted++;
    push_event(f, slot, 1);
    uint8_t greeting[PK_ZMTP_GREETING_LEN];
    pk_zmtp_encode_greeting(greeting);
    if (raw_send(f, &f->conns[slot], greeting, sizeof greeting) != 0)
        release(f, slot, 1);
}

static void list_ready(pk_zmtp_front *f, uint32_t slot) {
    fconn *c = &f->conns[slot];
    if (c->listed)
        return;
    c->listed = 1;
    f->ready[(f->ready_head + f->ready_len++) % f->cap_conns] = slot;
}

/* Reads one chunk off the STREAM socket. -1: nothing there. */
static int read_chunk(pk_zmtp_front *f) {
    zmq_msg_t rid, data;
    zmq_msg_init(&rid);
    if (zmq_msg_recv(&rid, f->sock, ZMQ_DONTWAIT) < 0) {
        zmq_msg_close(&rid);
        return -1;
    }
    zmq_msg_init(&data);
    if (!zmq_msg_more(&rid) || zmq_msg_recv(&data, f->sock, ZMQ_DONTWAIT) < 0 ||
        zmq_msg_size(&rid) > RID_MAX) {
        zmq_msg_close(&rid);
        zmq_msg_close(&data);
        return 0;
    }
    const uint8_t *r = zmq_msg_data(&rid);
    size_t rl = zmq_msg_size(&rid), n = zmq_msg_size(&data);
    uint32_t slot = find_rid(f, r, rl);
    if (n == 0) { /* STREAM's notification: connected (new id) or disconnected */
        if (slot == NONE)
            open_conn(f, r, rl);
        else
            release(f, slot, 0);
    } else {
        if (slot == NONE) { /* its notification was lost: a connection all the same */
            open_conn(f, r, rl);
            slot = find_rid(f, r, rl);
        }
        fconn *c = slot == NONE ? NULL : &f->conns[slot];
        if (c && !c->closing) {
            /* Bounded: a connection on no ready queue holds at most one unfinished frame. */
            size_t need = c->in_len + n;
            if (need > f->max_message + PK_ZMTP_MAX_COMMAND + (1u << 20)) {
                f->counts.refused++;
                release(f, slot, 1);
            } else {
                if (need > c->in_cap) {
                    size_t cap = c->in_cap ? c->in_cap : 4096;
                    while (cap < need)
                        cap *= 2;
                    uint8_t *in = realloc(c->in, cap);
                    if (!in) {
                        f->counts.refused++;
                        release(f, slot, 1);
                        goto done;
                    }
                    c->in = in;
                    c->in_cap = cap;
                }
                memcpy(c->in + c->in_len, zmq_msg_data(&data), n);
                c->in_len = need;
                list_ready(f, slot);
            }
        }
    }
done:
    zmq_msg_close(&rid);
    zmq_msg_close(&data);
    return 0;
}

/* The message c has finished receiving goes out: [peer id][its frames]. */
static void hand_out(pk_zmtp_front *f, uint32_t slot) {
    fconn *c = &f->conns[slot];
    zmq_msg_init_size(&f->out[0], PK_ZMTP_PEER_ID_LEN);
    memcpy(zmq_msg_data(&f->out[0]), c->peer, PK_ZMTP_PEER_ID_LEN);
    for (int i = 0; i < c->n_parts; i++) {
        zmq_msg_init(&f->out[1 + i]);
        zmq_msg_move(&f->out[1 + i], &c->parts[i]);
        zmq_msg_close(&c->parts[i]);
    }
    f->out_n = 1 + c->n_parts;
    f->out_i = 0;
    f->out_conn = slot;
    c->n_parts = 0;
    f->counts.messages++;
}

/* Parses what slot has buffered until a message is whole (1, handed out) or more bytes are
 * needed (0). Handshake and heartbeats are answered on the way. */
static int extract(pk_zmtp_front *f, uint32_t slot) {
    fconn *c = &f->conns[slot];
    size_t off = 0;
    int got = 0;
    while (!got) {
        pk_zmtp_event ev;
        size_t used = 0;
        pk_zmtp_kind k = pk_zmtp_parse(&c->z, c->in + off, c->in_len - off, &used, &ev);
        if (k == PK_ZMTP_NEED_MORE)
            break;
        if (k == PK_ZMTP_CLOSE) {
            refuse(f, slot, &ev);
            return 0;
        }
        if (k == PK_ZMTP_READY || k == PK_ZMTP_PING) {
            uint8_t buf[128];
            size_t n = k == PK_ZMTP_READY ? pk_zmtp_encode_ready(buf, sizeof buf, "ROUTER")
                                          : pk_zmtp_encode_pong(buf, sizeof buf, ev.data, ev.size);
            if (k == PK_ZMTP_READY)
                f->counts.served++;
            if (raw_send(f, c, buf, n) < 0) {
                release(f, slot, 0);
                return 0;
            }
        } else if (k == PK_ZMTP_FRAME) {
            int i = c->n_parts;
            if (i < PK_ZMTP_FRONT_MAX_PARTS) {
                c->n_parts++;
            } else { /* past the limit: the last frame kept is replaced */
                i = PK_ZMTP_FRONT_MAX_PARTS - 1;
                zmq_msg_close(&c->parts[i]);
            }
            if (zmq_msg_init_size(&c->parts[i], ev.size) != 0) {
                c->n_parts = i; /* no memory: this connection goes */
                f->counts.refused++;
                release(f, slot, 1);
                return 0;
            }
            if (ev.size)
                memcpy(zmq_msg_data(&c->parts[i]), ev.data, ev.size);
            got = !ev.more;
        }
        off += used;
    }
    memmove(c->in, c->in + off, c->in_len - off);
    c->in_len -= off;
    if (got) {
        hand_out(f, slot);
        if (c->in_len)
            list_ready(f, slot); /* pipelined requests: after the other connections' */
    }
    return got;
}

static int give_frame(pk_zmtp_front *f, zmq_msg_t *part, int *more, uint32_t *conn) {
    zmq_msg_move(part, &f->out[f->out_i]);
    zmq_msg_close(&f->out[f->out_i]);
    f->out_i++;
    *more = f->out_i < f->out_n;
    *conn = f->out_conn;
    if (!*more)
        f->out_n = f->out_i = 0;
    return 0;
}

int pk_zmtp_front_recv(pk_zmtp_front *f, zmq_msg_t *part, int *more, uint32_t *conn) {
    if (f->out_i < f->out_n)
        return give_frame(f, part, more, conn);
    for (;;) {
        while (f->ready_len > 0) {
            uint32_t slot = f->ready[f->ready_head];
            f->ready_head = (f->ready_head + 1) % f->cap_conns;
            f->ready_len--;
            fconn *c = &f->conns[slot];
            c->listed = 0;
            if (c->used && !c->closing && extract(f, slot))
                return give_frame(f, part, more, conn);
        }
        if (read_chunk(f) < 0)
            return -1;
    }
}

int pk_zmtp_front_send(pk_zmtp_front *f, const void *peer, size_t peer_len,
                       const void *const *frames, const size_t *lens, int n) {
    uint32_t slot = find_peer(f, peer, peer_len);
    if (slot == NONE || f->conns[slot].closing || f->conns[slot].z.phase != PK_ZMTP_PHASE_TRAFFIC)
        return 1;
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += (lens[i] <= 255 ? 2 : 9) + lens[i];
    zmq_msg_t m;
    if (zmq_msg_init_size(&m, total) != 0)
        return -1;
    uint8_t *p = zmq_msg_data(&m);
    size_t at = 0;
    for (int i = 0; i < n; i++) {
        at += pk_zmtp_encode_frame_header(p + at, lens[i], i + 1 < n);
        if (lens[i])
            memcpy(p + at, frames[i], lens[i]);
        at += lens[i];
    }
    fconn *c = &f->conns[slot];
    if (zmq_send(f->sock, c->rid, c->rid_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) {
        if (zmq_errno() != EAGAIN) /* EHOSTUNREACH: it has gone */
            release(f, slot, 0);
    } else if (zmq_msg_send(&m, f->sock, ZMQ_DONTWAIT) >= 0) {
        return 0; /* the message is ZeroMQ's now */
    }
    zmq_msg_close(&m);
    return 1;
}

int pk_zmtp_front_has_peer(pk_zmtp_front *f, const void *peer, size_t peer_len) {
    if (!f)
        return 0;
    uint32_t slot = find_peer(f, peer, peer_len);
    return slot != NONE && !f->conns[slot].closing;
}

int pk_zmtp_front_next_event(pk_zmtp_front *f, pk_zmtp_conn_event *ev) {
    if (f->ev_len == 0)
        return 0;
    *ev = f->events[f->ev_head];
    f->ev_head = (f->ev_head + 1) % f->ev_cap;
    f->ev_len--;
    return 1;
}

void pk_zmtp_front_tick(pk_zmtp_front *f) {
    if (!f)
        return;
    double now = pk_now_ms();
    if (now < f->next_scan_ms)
        return;
    f->next_scan_ms = now + SCAN_MS;
    for (uint32_t i = 0; i < f->n_conns; i++) {
        fconn *c = &f->conns[i];
        if (!c->used)
            continue;
        if (c->closing && now >= c->close_at_ms) {
            release(f, i, 1);
        } else if (!c->closing && c->z.phase != PK_ZMTP_PHASE_TRAFFIC &&
                   now - c->opened_ms > f->handshake_ms) {
            /* A peer that never finishes its handshake holds nothing for long. */
            f->counts.refused++;
            release(f, i, 1);
        }
    }
}

void pk_zmtp_front_set_handshake_ms(pk_zmtp_front *f, double ms) {
    if (f)
        f->handshake_ms = ms;
}

int pk_zmtp_front_pending(const pk_zmtp_front *f) {
    return f && (f->out_i < f->out_n || f->ready_len > 0);
}

void *pk_zmtp_front_socket(pk_zmtp_front *f) {
    return f ? f->sock : NULL;
}

pk_zmtp_front_counts pk_zmtp_front_get_counts(const pk_zmtp_front *f) {
    return f->counts;
}

size_t pk_zmtp_front_connections(const pk_zmtp_front *f) {
    return f->n_open;
}

int pk_zmtp_front_new(void *zctx, size_t max_message, pk_zmtp_front **out, pk_error *err) {
    *out = NULL;
    pk_zmtp_front *f = calloc(1, sizeof *f);
    if (!f)
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    f->max_message = max_message;
    f->free_head = NONE;
    f->handshake_ms = HANDSHAKE_MS;
    if (reindex(f, 256) != 0) {
        free(f);
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    }
    f->sock = zmq_socket(zctx, ZMQ_STREAM);
    int on = 1, hwm = 100000, linger = 1000;
    if (!f->sock || zmq_setsockopt(f->sock, ZMQ_STREAM_NOTIFY, &on, sizeof on) != 0 ||
        zmq_setsockopt(f->sock, ZMQ_SNDHWM, &hwm, sizeof hwm) != 0 ||
        zmq_setsockopt(f->sock, ZMQ_RCVHWM, &hwm, sizeof hwm) != 0 ||
        zmq_setsockopt(f->sock, ZMQ_LINGER, &linger, sizeof linger) != 0) {
        int rc =
            pk_error_set(err, PK_ERR_SYSTEM, "ZMQ_STREAM socket: %s", zmq_strerror(zmq_errno()));
        pk_zmtp_front_free(f);
        return rc;
    }
    *out = f;
    return PK_OK;
}

void pk_zmtp_front_free(pk_zmtp_front *f) {
    if (!f)
        return;
    for (uint32_t i = 0; i < f->n_conns; i++) {
        if (f->conns[i].used) {
            drop_parts(&f->conns[i]);
            free(f->conns[i].in);
        }
    }
    for (int i = f->out_i; i < f->out_n; i++)
        zmq_msg_close(&f->out[i]);
    if (f->sock)
        zmq_close(f->sock);
    free(f->conns);
    free(f->rid_heads);
    free(f->peer_heads);
    free(f->ready);
    free(f->events);
    free(f);
}
