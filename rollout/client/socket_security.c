/* The one place where a pkgym socket gets its security (pk_curve.h). ZeroMQ copies a socket's
 * options into each listener when it binds, so one ROUTER can serve a CURVE tcp:// endpoint and
 * a plain ipc:// endpoint: the options are set before each bind. */
#include <stdio.h>
#include <string.h>
#include <strings.h>

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

int pk_socket_bind_secure(void *sock, const char *endpoint, const pk_curve_server *curve,
                          const char *domain, int insecure, char *resolved, size_t resolved_cap,
                          pk_error *err) {
    int tcp = strncmp(endpoint, "tcp://", 6) == 0;
    int use_curve = tcp && curve;
    if (tcp && !curve && !pk_endpoint_is_loopback_tcp(endpoint)) {
        if (!insecure)
            return pk_error_set(err, PK_ERR_INVALID,
                                "%s is not a loopback address and CURVE is off: anyone who "
                                "reaches it could run episodes unauthenticated. Give "
                                "--curve-secret-key FILE and --curve-allow DIR (keys from "
                                "pkgym keygen), or --insecure to accept that",
                                endpoint);
        fprintf(stderr,
                "pkgym: WARNING: %s is bound without CURVE (--insecure): every host that "
                "reaches it can use this server, unauthenticated and unencrypted\n",
                endpoint);
    }
    if (use_curve && (!domain || !*domain))
        return pk_error_set(err, PK_ERR_INVALID, "a CURVE endpoint needs a ZAP domain");
    int rc = set_curve_server(sock, use_curve ? curve : NULL, domain, err);
    if (rc)
        return rc;
    if (zmq_bind(sock, endpoint) != 0)
        return pk_error_set(err, PK_ERR_IO, "cannot bind %s: %s", endpoint,
                            zmq_strerror(zmq_errno()));
    if (resolved && resolved_cap) {
        size_t n = resolved_cap;
        if (zmq_getsockopt(sock, ZMQ_LAST_ENDPOINT, resolved, &n) != 0)
            snprintf(resolved, resolved_cap, "%s", endpoint);
    }
    /* What later binds of this socket get unless they ask: no CURVE. */
    return use_curve ? set_curve_server(sock, NULL, NULL, err) : PK_OK;
}

int pk_socket_connect_secure(void *sock, const char *endpoint, const pk_curve_client_keys *keys,
                             pk_error *err) {
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
