/* The handshakes of a broker's or a worker's socket, read through a ZeroMQ socket monitor:
 * a CURVE key the ZAP handler refused, a peer with another security mechanism, a peer that
 * does not complete the handshake. ZeroMQ itself only drops such a connection, silently;
 * the broker counts and logs them, and a worker turns a refusal into a clear error. */
#ifndef PK_HANDSHAKE_WATCH_H
#define PK_HANDSHAKE_WATCH_H

#include <stddef.h>
#include <stdint.h>

#include "pk_common.h"

typedef struct pk_handshake_watch {
    void *sock; /* the watched socket */
    void *pair; /* the monitor's events arrive here; poll it for ZMQ_POLLIN */
} pk_handshake_watch;

typedef enum pk_handshake_kind {
    PK_HANDSHAKE_OK,            /* ZMQ_EVENT_HANDSHAKE_SUCCEEDED */
    PK_HANDSHAKE_REFUSED,       /* the ZAP handler said no (value: its status, 400 for a key) */
    PK_HANDSHAKE_MECHANISM,     /* one end uses CURVE and the other does not */
    PK_HANDSHAKE_CRYPTOGRAPHIC, /* CURVE boxes did not open: the wrong server key */
    PK_HANDSHAKE_FAILED,        /* anything else (a peer that closed mid-handshake, garbage) */
} pk_handshake_kind;

typedef struct pk_handshake_event {
    pk_handshake_kind kind;
    uint32_t value; /* ZAP status or ZMQ_PROTOCOL_ERROR_* */
} pk_handshake_event;

/* Starts watching sock (a socket of zctx). */
int pk_handshake_watch_start(pk_handshake_watch *w, void *zctx, void *sock, pk_error *err);
/* One event: 0 and *ev set, or -1 when none is waiting. */
int pk_handshake_watch_read(pk_handshake_watch *w, pk_handshake_event *ev);
/* Stops and closes the monitor (before sock is closed). A zeroed watch is a no-op. */
void pk_handshake_watch_stop(pk_handshake_watch *w);
/* A short explanation of ev, e.g. "the ZAP handler refused its CURVE key (status 400)". */
const char *pk_handshake_describe(const pk_handshake_event *ev, char *buf, size_t cap);

#endif
