/* CURVE and the binds of the client endpoints (server_endpoints.h). */
#include "server_endpoints.h"

#include <stdio.h>

#include "pk_broker.h"

/* Every client endpoint through the one secure-bind function (pk_curve.h): CURVE on network
 * transports when configured (on the ROUTER: the ZAP handler names the peers), plain ones only
 * on loopback unless --insecure, on the ZMTP front (the server names the peers: issue 27,
 * finding 1); plain ws:// and the like are refused. */
static int bind_all(pk_server *s, pk_error *err) {
    int tcp = 0;
    /* The key pair may serve only the worker endpoints (no --curve-allow). */
    const pk_curve_server *curve = s->opts.curve_allow ? s->curve : NULL;
    for (int i = 0; i < s->opts.n_binds; i++) {
        char resolved[256];
        int rc = pk_socket_bind_secure(s->router, pk_zmtp_front_socket(s->front), s->opts.binds[i],
                                       curve, PK_CURVE_DOMAIN_CLIENTS, s->opts.insecure, resolved,
                                       sizeof resolved, NULL, err);
        if (rc)
            return rc;
        int network = pk_endpoint_uses_curve(resolved);
        tcp |= network;
        fprintf(stderr, "pkgym serve: bound %s%s\n", resolved,
                !network ? ""
                : curve  ? " (CURVE)"
                         : " (no CURVE)");
    }
    if (curve && !tcp)
        fprintf(stderr, "pkgym serve: note: CURVE applies to network endpoints (tcp://, ws://, "
                        "...); none is bound\n");
    return PK_OK;
}

/* CURVE: the server's key pair and the ZAP handler, before any socket is bound. One key pair
 * serves the client and the worker endpoints; each has its own ZAP domain and allow directory,
 * so a client key never admits a worker, nor a worker key a client. */
static int init_curve(pk_server *s, pk_error *err) {
    const char *key = s->opts.curve_secret_key, *allow = s->opts.curve_allow,
               *worker_allow = s->opts.worker_curve_allow;
    if (!key && !allow && !worker_allow)
        return PK_OK;
    if (!key)
        return pk_error_set(err, PK_ERR_INVALID,
                            "%s needs --curve-secret-key FILE: the server's key pair (pkgym "
                            "keygen), by which clients and workers authenticate the server",
                            allow ? "--curve-allow DIR" : "--worker-curve-allow DIR");
    if (!allow && !worker_allow)
        return pk_error_set(err, PK_ERR_INVALID,
                            "--curve-secret-key FILE needs --curve-allow DIR (the directory of "
                            "authorized client keys), --worker-curve-allow DIR (authorized "
                            "worker keys), or both");
    if (worker_allow && s->opts.n_worker_binds == 0)
        return pk_error_set(err, PK_ERR_INVALID,
                            "--worker-curve-allow applies to --worker-bind endpoints, and none "
                            "is given");
    int rc = pk_curve_server_start(s->zctx, key, &s->curve, err);
    if (rc == PK_OK && allow)
        rc = pk_curve_server_allow(s->curve, PK_CURVE_DOMAIN_CLIENTS, allow, err);
    if (rc == PK_OK && worker_allow)
        rc = pk_curve_server_allow(s->curve, PK_BROKER_ZAP_DOMAIN, worker_allow, err);
    if (rc == PK_OK)
        fprintf(stderr,
                "pkgym serve: CURVE server key %s; clients allowed from %s; workers "
                "allowed from %s\n",
                pk_curve_server_public_key(s->curve), allow ? allow : "(no CURVE for clients)",
                worker_allow ? worker_allow : "(no CURVE for workers)");
    return rc;
}

int pk_server_bind_endpoints(pk_server *s, pk_error *err) {
    int rc = init_curve(s, err);
    return rc == PK_OK ? bind_all(s, err) : rc;
}
