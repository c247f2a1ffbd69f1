/* Asks a ZeroMQ endpoint which security mechanism it speaks, without a handshake. When one end
 * uses CURVE and the other does not, libzmq reports the mismatch only if the peer's greeting
 * arrived before the peer closed the connection; often it closes first, and the connecting side
 * sees only "the handshake did not complete" (a worker without keys took 0.03-60 s to say that the
 * broker requires CURVE, retrying with back-off meanwhile). The probe sends only the start of a
 * ZMTP 3 greeting (signature and major version), on which the peer sends all of its own, and
 * reads the mechanism from it: the peer never sees ours, so it has nothing to refuse early. */
#ifndef PK_ZMTP_PROBE_H
#define PK_ZMTP_PROBE_H

#include "pk_common.h"

/* endpoint: tcp://HOST:PORT or ipc://PATH. On success *mechanism holds the peer's mechanism
 * ("NULL", "PLAIN", "CURVE"; at most 20 characters) and PK_OK is returned; an error (with
 * err set) when it cannot connect, the peer does not answer within timeout_ms, or its answer
 * is no ZMTP 3 greeting. */
int pk_zmtp_probe_mechanism(const char *endpoint, int timeout_ms, char mechanism[21],
                            pk_error *err);

#endif
