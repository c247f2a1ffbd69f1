/* `pkgym keygen`: a CURVE key pair for the server or a client (docs/security.md). */
#include <stdio.h>
#include <string.h>

#include "pk_curve.h"
#include "pk_env.h"
#include "pk_opts.h"

enum { N_OPTS = 1 };

static void usage(FILE *f, const pk_opt *t) {
    fprintf(f, "usage: pkgym keygen [--force] BASE\n\n"
               "Writes a CURVE key pair: BASE.key (public and secret key, mode 0600) and\n"
               "BASE.pub (the public key), in ZeroMQ's certificate format.\n\n"
               "  server:  pkgym serve --curve-secret-key BASE.key --curve-allow DIR\n"
               "  client:  give BASE.pub to the operator, who copies it into DIR; connect with\n"
               "           the server's .pub and your BASE.key (pkgym_client: curve_server_key=,\n"
               "           curve_client_key=; C and pkgym eval: PKGYM_CURVE_SERVER_KEY and\n"
               "           PKGYM_CURVE_CLIENT_KEY)\n\n");
    pk_opts_help(f, t, N_OPTS);
}

int pk_cmd_keygen(int argc, char **argv) {
    const char *args[1];
    int force = 0, n_args = 0;
    const pk_opt t[N_OPTS] = {
        {.type = PK_OPT_FLAG, .name = "--force", .help = "replace existing files", .dest = &force},
    };
    int prc = pk_opts_parse_args("keygen", t, N_OPTS, argc, argv, 1, args, 1, &n_args);
    if (prc == PK_OPTS_HELP) {
        usage(stdout, t);
        return 0;
    }
    if (prc != PK_OPTS_OK)
        return 2;
    if (n_args == 0) {
        fprintf(stderr, "pkgym keygen: BASE is required (see --help)\n");
        return 2;
    }
    const char *base = args[0];
    pk_curve_keypair kp;
    pk_error err;
    int rc = pk_curve_keypair_new(&kp, &err);
    if (rc == PK_OK)
        rc = pk_curve_keypair_save(&kp, base, force, &err);
    memset(kp.secret_key, 0, sizeof kp.secret_key);
    if (rc) {
        fprintf(stderr, "pkgym keygen: %s\n", err.message);
        return 1;
    }
    printf("%s\n", kp.public_key);
    fprintf(stderr, "pkgym keygen: wrote %s.key (keep private) and %s.pub\n", base, base);
    return 0;
}
