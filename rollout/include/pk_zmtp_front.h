/* pk_zmtp_front: a ROUTER whose routing ids only the server chooses (issue 27, finding 1).
 *
 * libzmq 4.3.4's ROUTER takes the routing id a peer announces, and when the id it generates for
 * an anonymous peer is already held by a peer that chose it, it asserts and the process aborts.
 * A ZMQ_STREAM socket never takes an id from a peer: it names every accepted connection itself
 * (src/stream.cpp, identify_peer), and its data is the connection's raw bytes. On it, this
 * module speaks ZMTP 3.0/3.1 with the NULL mechanism (pk_zmtp.h) to DEALER and REQ peers, and
 * names each peer with 16 random bytes of its own (never starting with 0x00, unique among the
 * open connections), whatever the peer's READY says.
 *
 * To the server it looks like the ROUTER: pk_zmtp_front_recv gives one whole message as
 * [peer id][the peer's frames...] frame by frame, and pk_zmtp_front_send routes a reply to a
 * peer id (dropped silently when the peer has gone or its send queue is full, as the ROUTER
 * does). Limits: one message holds at most max_message bytes (beyond: that connection is
 * closed, as ZMQ_MAXMSGSIZE does); what a connection has sent and the server has not read is
 * bounded by about one message; a connection that has not finished its handshake within 30 s
 * is closed (ZMQ_HANDSHAKE_IVL's default); plain tcp:// and ipc:// only (libzmq has no ws://
 * STREAM).
 *
 * Not thread-safe: one thread uses a front, as with a ZeroMQ socket. */
#ifndef PK_ZMTP_FRONT_H
#define PK_ZMTP_FRONT_H

#include <stddef.h>
#include <stdint.h>

#include <zmq.h>

#include "pk_common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PK_ZMTP_PEER_ID_LEN 16
/* Frames of one message kept; a message with more is delivered as its first frames and its last
 * (still more than any envelope the server accepts, so it is answered bad_request). */
#define PK_ZMTP_FRONT_MAX_PARTS 8

typedef struct pk_zmtp_front pk_zmtp_front;

/* A connection opened (open 1: its peer was greeted) or closed (0), by its slot: a small number
 * reused after the close was reported. */
typedef struct pk_zmtp_conn_event {
    uint32_t conn;
    int open;
} pk_zmtp_conn_event;

typedef struct pk_zmtp_front_counts {
    uint64_t accepted; /* connections */
    uint64_t served;   /* connections whose READY was accepted */
    uint64_t refused;  /* closed by the server: bad greeting, socket type, size, protocol */
    uint64_t messages; /* whole messages received */
} pk_zmtp_front_counts;

int pk_zmtp_front_new(void *zctx, size_t max_message, pk_zmtp_front **out, pk_error *err);
/* Closes the socket (before zmq_ctx_term). NULL is a no-op. */
void pk_zmtp_front_free(pk_zmtp_front *f);
/* The ZMQ_STREAM socket: bind it (tcp://, ipc://) and poll it for ZMQ_POLLIN. */
void *pk_zmtp_front_socket(pk_zmtp_front *f);
/* 1 when messages may be ready without the socket being readable: poll with timeout 0. */
int pk_zmtp_front_pending(const pk_zmtp_front *f);
/* The next frame of the next whole message, without waiting: 0 with *part (initialised by the
 * caller), *more and *conn (the slot it came on); -1 when no whole message is there. */
int pk_zmtp_front_recv(pk_zmtp_front *f, zmq_msg_t *part, int *more, uint32_t *conn);
/* Sends the n frames to the peer named peer (an id pk_zmtp_front_recv gave). 0 when sent, 1
 * when dropped (no such peer, it has gone, or its queue is full: what a ROUTER drops silently,
 * and refuses with ZMQ_ROUTER_MANDATORY), -1 when out of memory. */
int pk_zmtp_front_send(pk_zmtp_front *f, const void *peer, size_t peer_len,
                       const void *const *frames, const size_t *lens, int n);
/* 1 when peer names an open connection of f. */
int pk_zmtp_front_has_peer(pk_zmtp_front *f, const void *peer, size_t peer_len);
/* 1 with the oldest connection event not taken yet, 0 when there is none. */
int pk_zmtp_front_next_event(pk_zmtp_front *f, pk_zmtp_conn_event *ev);
/* Closes the connections whose ERROR command has had time to leave, and those that have not
 * finished their handshake (greeting and READY) within the handshake time; call it every poll
 * round (it looks at the connections at most every 50 ms). */
void pk_zmtp_front_tick(pk_zmtp_front *f);
/* The handshake time: 30 s by default, as libzmq's ZMQ_HANDSHAKE_IVL. */
void pk_zmtp_front_set_handshake_ms(pk_zmtp_front *f, double ms);
pk_zmtp_front_counts pk_zmtp_front_get_counts(const pk_zmtp_front *f);
/* Open connections. */
size_t pk_zmtp_front_connections(const pk_zmtp_front *f);

#ifdef __cplusplus
}
#endif

#endif
