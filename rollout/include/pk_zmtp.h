/* pk_zmtp: the server side of one ZMTP 3.0/3.1 connection with the NULL mechanism (RFC 23 and
 * RFC 37 of rfc.zeromq.org), as a parser over a byte buffer: no socket, no allocation. It is
 * what pk_zmtp_front.h runs on every connection of its ZMQ_STREAM socket, so that the server,
 * not the peer, names each peer (issue 27, finding 1).
 *
 * The caller keeps the bytes a connection sent in one buffer and calls pk_zmtp_parse on what
 * it has not consumed yet; each call consumes one unit (the greeting, one frame) or nothing
 * when the unit is not complete, so a peer may split its bytes anywhere. A frame is returned
 * only whole, and its size is checked as soon as its header is there: what one message holds
 * never exceeds max_message.
 *
 * Served: DEALER and REQ peers (their READY's Socket-Type), any Identity property ignored;
 * frames with 1- and 8-byte sizes; PING answered by PONG (ZMTP 3.1 heartbeats); an ERROR from
 * the peer closes. Everything else closes the connection. */
#ifndef PK_ZMTP_H
#define PK_ZMTP_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define PK_ZMTP_GREETING_LEN 64
#define PK_ZMTP_SIGNATURE_LEN 10
/* A command frame may hold this much (READY's properties, PING's context). */
#define PK_ZMTP_MAX_COMMAND 8192
/* PING's context is at most 16 bytes (RFC 37). */
#define PK_ZMTP_MAX_PING_CONTEXT 16

typedef enum pk_zmtp_phase {
    PK_ZMTP_PHASE_GREETING = 0, /* waiting for the peer's 64-byte greeting */
    PK_ZMTP_PHASE_HANDSHAKE,    /* greeted: waiting for the peer's READY */
    PK_ZMTP_PHASE_TRAFFIC,      /* READY exchanged: messages and heartbeats */
    PK_ZMTP_PHASE_CLOSED        /* a CLOSE event was returned: nothing more is parsed */
} pk_zmtp_phase;

typedef enum pk_zmtp_kind {
    PK_ZMTP_NEED_MORE = 0, /* the next unit is not complete: nothing consumed */
    PK_ZMTP_CONSUMED,      /* a unit that asks nothing of the caller (the greeting, a PONG) */
    PK_ZMTP_READY,         /* the peer's READY is acceptable: send pk_zmtp_encode_ready */
    PK_ZMTP_FRAME,         /* one frame of a message: data, size, more */
    PK_ZMTP_PING,          /* send pk_zmtp_encode_pong with data, size (the PING's context) */
    PK_ZMTP_CLOSE          /* close the connection; with send_error, send an ERROR first */
} pk_zmtp_kind;

typedef struct pk_zmtp_event {
    pk_zmtp_kind kind;
    const uint8_t *data; /* FRAME: the frame's bytes, PING: its context (inside the buffer) */
    size_t size;
    int more;           /* FRAME: another frame of this message follows */
    int send_error;     /* CLOSE: the peer is a ZMTP 3 peer that can read an ERROR command */
    char reason[160];   /* CLOSE: why, for the ERROR command and the log */
    char peer_type[24]; /* READY: the peer's Socket-Type */
} pk_zmtp_event;

typedef struct pk_zmtp_conn {
    pk_zmtp_phase phase;
    size_t max_message;   /* the most bytes the frames of one message may hold together */
    size_t message_bytes; /* of the message being received, in the frames consumed so far */
    int minor;            /* the peer's ZMTP minor version */
} pk_zmtp_conn;

void pk_zmtp_conn_init(pk_zmtp_conn *c, size_t max_message);
/* Parses the next unit of buf[0, len) (the bytes not consumed yet); *used gets the bytes it
 * consumed (0 for NEED_MORE and CLOSE). Returns ev->kind. After CLOSE every call returns CLOSE. */
pk_zmtp_kind pk_zmtp_parse(pk_zmtp_conn *c, const uint8_t *buf, size_t len, size_t *used,
                           pk_zmtp_event *ev);

/* The server's greeting: ZMTP 3.1, NULL, as-server. Sent as soon as a peer connects. */
void pk_zmtp_encode_greeting(uint8_t out[PK_ZMTP_GREETING_LEN]);
/* The encoders return the bytes written, 0 when cap is too small. */
/* READY with Socket-Type (the server's: "ROUTER"). */
size_t pk_zmtp_encode_ready(uint8_t *out, size_t cap, const char *socket_type);
size_t pk_zmtp_encode_error(uint8_t *out, size_t cap, const char *reason);
size_t pk_zmtp_encode_pong(uint8_t *out, size_t cap, const uint8_t *context, size_t len);
/* A frame's header (flags and size) for size bytes of data: 2 or 9 bytes. */
size_t pk_zmtp_encode_frame_header(uint8_t out[9], size_t size, int more);

#ifdef __cplusplus
}
#endif

#endif
