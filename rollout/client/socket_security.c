/* The one place where a pkgym socket gets its security (pk_curve.h). ZeroMQ copies a socket's
 * options into each listener when it binds, so one ROUTER can serve a CURVE tcp:// endpoint and
 * a plain ipc:// endpoint: the options are set before each bind. */
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <stdlib.h>

#include <zmq.h>

#include "curve_internal.h"

/* The host part of tcp://HOST:PORT (brackets kept off IPv6 addresses). */
static int tcp_host(const char *endpoint, char *host, size_t cap) {
    if (strncmp(endpoint, "tcp://", 6) != 0)
        return -1;
    const char *h = endpoint + 6;
    const char *semi = strchr(h, ';'); /* "source;destination": the destination counts */
    if (semi)
        h = semi + 1;
    const char *end;
    if (*h == '[') {
        h++;
        end = strchr(h, ']');
    } else {
        end = strrchr(h, ':');
    }
    if (!end || (size_t)(end - h) >= cap)
        return -1;
    memcpy(host, h, (size_t)(end - h));
    host[end - h] = '\0';
    return 0;
}

int pk_endpoint_is_loopback_tcp(const char *endpoint) {
    char host[256];
    if (tcp_host(endpoint, host, sizeof host) != 0)
        return 0;
    if (strncmp(host, "127.", 4) == 0) {
        /* Only a dotted IPv4 address: "127.example.com" is a name that resolves anywhere. */
        for (const char *c = host + 4; *c; c++)
            if (!((*c >= '0' && *c <= '9') || *c == '.'))
                return 0;
        return 1;
    }
    return strcmp(host, "::1") == 0 || strcasecmp(host, "localhost") == 0 ||
           strcmp(host, "lo") == 0;
}

/* CURVE on (curve non-NULL) or off. libzmq cannot clear a ZAP domain once set: a later plain
 * bind keeps it, and the ZAP handler admits the NULL mechanism, which only a plain listener
 * offers (a NULL peer never completes a handshake with a CURVE listener). */
static int set_curve_server(void *sock, const pk_curve_server *curve, const char *domain,
                            pk_error *err) {
    int on = curve ? 1 : 0;
    if (curve && (zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, pk_curve_server_secret(curve),
                                 PK_CURVE_KEY_LEN) != 0 ||
                  zmq_setsockopt(sock, ZMQ_ZAP_DOMAIN, domain, strlen(domain)) != 0))
        return pk_error_set(err, PK_ERR_SYSTEM, "CURVE server options: %s",
                            zmq_strerror(zmq_errno()));
    if (zmq_setsockopt(sock, ZMQ_CURVE_SERVER, &on, sizeof on) != 0)
        return pk_error_set(err, PK_ERR_SYSTEM, "socket security options: %s",
                            zmq_strerror(zmq_errno()));
    return PK_OK;
}

/* Every transport libzmq has, and what decides who can reach an endpoint of it. */
typedef enum endpoint_reach {
    REACH_PROCESS, /* inproc: this process only */
    REACH_FILES,   /* ipc: whoever may open the socket file (its directory's permissions) */
    REACH_NETWORK, /* tcp, ws, wss, tipc, vmci: other hosts, or other users of this one */
    REACH_NONE     /* pgm, epgm, norm, udp: publish-subscribe and radio-dish transports */
} endpoint_reach;

static const struct {
    const char *scheme;
    endpoint_reach reach;
    int has_loopback; /* the address can be loopback only (tcp://127.0.0.1:..., ws://[::1]:...) */
    int has_stream;   /* a ZMQ_STREAM socket can serve it (pk_zmtp_front.h) */
} transports[] = {
    {"inproc", REACH_PROCESS, 0, 0}, {"ipc", REACH_FILES, 0, 1},   {"tcp", REACH_NETWORK, 1, 1},
    {"ws", REACH_NETWORK, 1, 0},     {"wss", REACH_NETWORK, 1, 0}, {"tipc", REACH_NETWORK, 0, 0},
    {"vmci", REACH_NETWORK, 0, 0},   {"pgm", REACH_NONE, 0, 0},    {"epgm", REACH_NONE, 0, 0},
    {"norm", REACH_NONE, 0, 0},      {"udp", REACH_NONE, 0, 0},
};

/* The transport of endpoint (index into transports), or -1 when libzmq names none such. */
static int transport_of(const char *endpoint) {
    const char *sep = strstr(endpoint, "://");
    if (!sep)
        return -1;
    size_t n = (size_t)(sep - endpoint);
    for (size_t i = 0; i < sizeof transports / sizeof *transports; i++)
        if (strlen(transports[i].scheme) == n && strncmp(endpoint, transports[i].scheme, n) == 0)
            return (int)i;
    return -1;
}

int pk_endpoint_is_loopback(const char *endpoint) {
    int t = transport_of(endpoint);
    if (t < 0 || !transports[t].has_loopback)
        return 0;
    /* ws://HOST:PORT/PATH and wss://...: the same host rules as tcp:// once the path is off. */
    char tcp[512];
    const char *rest = strstr(endpoint, "://") + 3;
    size_t n = strcspn(rest, "/");
    if (n + 7 > sizeof tcp)
        return 0;
    snprintf(tcp, sizeof tcp, "tcp://%.*s", (int)n, rest);
    return pk_endpoint_is_loopback_tcp(tcp);
}

/* The one rule (docs/security.md, "Transports"): an endpoint that other hosts or users can reach
 * gets CURVE when there are keys, else it must be loopback, else --insecure says so (warning);
 * ipc:// relies on its directory's permissions, inproc:// on the process; the rest is refused.
 * With a STREAM socket, the plain endpoints that can go on it do, and the others are refused. */
int pk_socket_bind_secure(void *sock, void *plain_stream, const char *endpoint,
                          const pk_curve_server *curve, const char *domain, int insecure,
                          char *resolved, size_t resolved_cap, int *on_stream, pk_error *err) {
    if (on_stream)
        *on_stream = 0;
    int t = transport_of(endpoint);
    if (t < 0)
        return pk_error_set(err, PK_ERR_INVALID,
                            "%s: unknown transport (pkgym binds tcp://, ws://, wss://, tipc://, "
                            "vmci://, ipc:// and inproc://)",
                            endpoint);
    if (transports[t].reach == REACH_NONE)
        return pk_error_set(err, PK_ERR_INVALID,
                            "%s: %s:// carries no request-reply sockets (use tcp:// or ipc://)",
                            endpoint, transports[t].scheme);
    int network = transports[t].reach == REACH_NETWORK;
    int use_curve = network && curve;
    /* Plain endpoints (no CURVE, hence no routing ids from the ZAP handler) go on the STREAM
     * socket, whose peers never name themselves (issue 27, finding 1); inproc:// is this
     * process's own code and stays on the ROUTER. */
    int stream = plain_stream && !use_curve && transports[t].reach != REACH_PROCESS;
    if (stream && !transports[t].has_stream)
        return pk_error_set(err, PK_ERR_INVALID,
                            "%s: a plain %s:// endpoint cannot be served: on a ROUTER socket a "
                            "client could claim the routing id given to the next connection and "
                            "abort the server (libzmq asserts; issue 27, finding 1), and the "
                            "STREAM socket that serves plain endpoints has no %s:// transport. "
                            "Use tcp:// or ipc://, or CURVE (--curve-secret-key FILE and "
                            "--curve-allow DIR for clients, --worker-curve-allow DIR for "
                            "workers: routing ids then come from the server)",
                            endpoint, transports[t].scheme, transports[t].scheme);
    void *target = stream ? plain_stream : sock;
    if (network && !curve && !pk_endpoint_is_loopback(endpoint)) {
        if (!insecure)
            return pk_error_set(err, PK_ERR_INVALID,
                                "%s is not a loopback address and CURVE is off: anyone who "
                                "reaches it could use it unauthenticated. Give "
                                "--curve-secret-key FILE and the directory of allowed keys "
                                "(--curve-allow DIR for clients, --worker-curve-allow DIR for "
                                "workers; keys from pkgym keygen), or --insecure to accept that",
                                endpoint);
        fprintf(stderr,
                "pkgym: WARNING: %s is bound without CURVE (--insecure): every host that "
                "reaches it can use this server, unauthenticated and unencrypted\n",
                endpoint);
    }
    if (use_curve && (!domain || !*domain))
        return pk_error_set(err, PK_ERR_INVALID, "a CURVE endpoint needs a ZAP domain");
    int rc = set_curve_server(target, use_curve ? curve : NULL, domain, err);
    if (rc)
        return rc;
    if (zmq_bind(target, endpoint) != 0)
        return pk_error_set(err, PK_ERR_IO, "cannot bind %s: %s", endpoint,
                            zmq_strerror(zmq_errno()));
    if (on_stream)
        *on_stream = stream;
    if (resolved && resolved_cap) {
        size_t n = resolved_cap;
        if (zmq_getsockopt(target, ZMQ_LAST_ENDPOINT, resolved, &n) != 0)
            snprintf(resolved, resolved_cap, "%s", endpoint);
    }
    /* What later binds of this socket get unless they ask: no CURVE. */
    return use_curve ? set_curve_server(sock, NULL, NULL, err) : PK_OK;
}

int pk_endpoint_uses_curve(const char *endpoint) {
    int t = transport_of(endpoint);
    return t >= 0 && transports[t].reach == REACH_NETWORK;
}

int pk_socket_connect_secure(void *sock, const char *endpoint, const pk_curve_client_keys *keys,
                             pk_error *err) {
    int t = transport_of(endpoint);
    if (t < 0 || transports[t].reach == REACH_NONE)
        return pk_error_set(err, PK_ERR_INVALID,
                            "%s: not a transport pkgym connects over (tcp://, ws://, wss://, "
                            "tipc://, vmci://, ipc://, inproc://)",
                            endpoint);
    if (keys) {
        if (zmq_setsockopt(sock, ZMQ_CURVE_SERVERKEY, keys->server_public, PK_CURVE_KEY_LEN) ||
            zmq_setsockopt(sock, ZMQ_CURVE_PUBLICKEY, keys->client.public_key, PK_CURVE_KEY_LEN) ||
            zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, keys->client.secret_key, PK_CURVE_KEY_LEN))
            return pk_error_set(err, PK_ERR_SYSTEM, "CURVE client keys: %s",
                                zmq_strerror(zmq_errno()));
    }
    if (zmq_connect(sock, endpoint) != 0)
        return pk_error_set(err, PK_ERR_INVALID, "connect %s: %s", endpoint,
                            zmq_strerror(zmq_errno()));
    return PK_OK;
}

void *pk_router_socket_new(void *zctx) {
    /* libzmq 4.3.4 numbers the peers that send no routing id from a counter that starts at
     * rand()'s next two values, and never seeds rand(): the same number on every start, so a
     * client could claim the id the next peer will get, and the ROUTER then aborts when it
     * hands it out (issue 27, finding 1). Seeded here, the start is unknown to clients. */
    unsigned seed;
    if (getrandom(&seed, sizeof seed, 0) == (ssize_t)sizeof seed)
        srand(seed);
    return zmq_socket(zctx, ZMQ_ROUTER);
}
