/* Client presence (client_presence.h). */
#include "client_presence.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WATCHED (ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED)
#define MAX_FD (1 << 20)

typedef struct conn {
    int open;                /* its ACCEPTED event was seen, its DISCONNECTED not yet */
    pk_client_entry *client; /* the client whose request came on it first; NULL: none yet */
} conn;

typedef struct conn_table {
    conn *conns;
    int n_conns;
} conn_table;

struct pk_presence {
    void *router;
    void *events;     /* PAIR end of the monitor */
    conn_table by_fd; /* the ROUTER's connections, by file descriptor */
    pk_zmtp_front *front;
    conn_table by_slot; /* the front's connections, by slot */
};

int pk_presence_start(void *zctx, void *router, pk_zmtp_front *front, pk_presence **out,
                      pk_error *err) {
    *out = NULL;
    pk_presence *p = calloc(1, sizeof *p);
    if (!p)
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    char addr[96];
    snprintf(addr, sizeof addr, "inproc://pkgym-presence-%p", (void *)p);
    p->router = router;
    p->front = front;
    int linger = 0;
    if (zmq_socket_monitor(router, addr, WATCHED) != 0 ||
        !(p->events = zmq_socket(zctx, ZMQ_PAIR)) ||
        zmq_setsockopt(p->events, ZMQ_LINGER, &linger, sizeof linger) != 0 ||
        zmq_connect(p->events, addr) != 0) {
        int rc = pk_error_set(err, PK_ERR_SYSTEM, "client monitor: %s", zmq_strerror(zmq_errno()));
        pk_presence_stop(p);
        return rc;
    }
    *out = p;
    return PK_OK;
}

void pk_presence_stop(pk_presence *p) {
    if (!p)
        return;
    zmq_socket_monitor(p->router, NULL, 0);
    if (p->events)
        zmq_close(p->events);
    free(p->by_fd.conns);
    free(p->by_slot.conns);
    free(p);
}

static conn *conn_of(conn_table *t, int fd) {
    if (fd < 0 || fd >= MAX_FD)
        return NULL;
    if (fd >= t->n_conns) {
        int n = t->n_conns ? t->n_conns : 256;
        while (n <= fd)
            n *= 2;
        conn *c = realloc(t->conns, (size_t)n * sizeof *c);
        if (!c)
            return NULL;
        memset(c + t->n_conns, 0, (size_t)(n - t->n_conns) * sizeof *c);
        t->conns = c;
        t->n_conns = n;
    }
    return &t->conns[fd];
}

static void detach(conn *k, double now_ms) {
    pk_client_entry *c = k->client;
    k->client = NULL;
    if (!c)
        return;
    if (--c->conns == 0) {
        c->gone_ms = now_ms;
        pk_client_drop_if_unused(c);
    }
}

void pk_presence_update(pk_presence *p, double now_ms) {
    if (!p)
        return;
    pk_zmtp_conn_event fev;
    while (p->front && pk_zmtp_front_next_event(p->front, &fev)) {
        /* In order, each slot's close before its reuse: nothing is lost between them. */
        conn *k = fev.conn < MAX_FD ? conn_of(&p->by_slot, (int)fev.conn) : NULL;
        if (k) {
            detach(k, now_ms);
            k->open = fev.open;
        }
    }
    for (;;) {
        zmq_msg_t ev, addr;
        zmq_msg_init(&ev);
        if (zmq_msg_recv(&ev, p->events, ZMQ_DONTWAIT) < 0) {
            zmq_msg_close(&ev);
            return;
        }
        uint16_t kind = 0;
        uint32_t fd = UINT32_MAX;
        if (zmq_msg_size(&ev) >= 6) {
            memcpy(&kind, zmq_msg_data(&ev), sizeof kind);
            memcpy(&fd, (const char *)zmq_msg_data(&ev) + 2, sizeof fd);
        }
        int more = zmq_msg_more(&ev);
        zmq_msg_close(&ev);
        if (more) { /* the endpoint frame */
            zmq_msg_init(&addr);
            zmq_msg_recv(&addr, p->events, 0);
            zmq_msg_close(&addr);
        }
        conn *k = fd < MAX_FD ? conn_of(&p->by_fd, (int)fd) : NULL;
        if (!k)
            continue;
        /* A descriptor is reused only after its DISCONNECTED event: an ACCEPTED one finding
         * a client still attached means that event was lost, so detach it now. */
        detach(k, now_ms);
        k->open = kind == ZMQ_EVENT_ACCEPTED;
    }
}

void pk_presence_seen(pk_presence *p, pk_client_entry *c, int on_front, int conn_id,
                      double now_ms) {
    if (!p || !c)
        return;
    conn *k = conn_of(on_front ? &p->by_slot : &p->by_fd, conn_id);
    if (k && k->open && !k->client) {
        k->client = c;
        c->conns++;
        c->gone_ms = 0;
    } else if (c->conns == 0 && c->gone_ms > 0) {
        /* Its connection is not attached yet (its ACCEPTED event is still on the way): it is
         * here now, so its time away starts again. */
        c->gone_ms = now_ms;
    }
}
