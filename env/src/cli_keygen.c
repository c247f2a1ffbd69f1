/* `pkgym keygen`: a CURVE key pair for the server or a client (docs/security.md). */
#include <stdio.h>
#include <string.h>

#include "pk_curve.h"
#include "pk_env.h"

static void usage(FILE *f) {
    fprintf(f, "usage: pkgym keygen [--force] BASE\n\n"
               "Writes a CURVE key pair: BASE.key (public and secret key, mode 0600) and\n"
               "BASE.pub (the public key), in ZeroMQ's certificate format.\n\n"
               "  server:  pkgym serve --curve-secret-key BASE.key --curve-allow DIR\n"
               "  client:  give BASE.pub to the operator, who copies it into DIR; connect with\n"
               "           the server's .pub and your BASE.key (pkgym_client: curve_server_key=,\n"
               "           curve_client_key=; C and pkgym eval: PKGYM_CURVE_SERVER_KEY and\n"
               "           PKGYM_CURVE_CLIENT_KEY)\n\n"
               "  --force   replace existing files\n");
}

int pk_cmd_keygen(int argc, char **argv) {
    const char *base = NULL;
    int force = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        }
        if (strcmp(argv[i], "--force") == 0)
            force = 1;
        else if (argv[i][0] == '-' || base) {
            fprintf(stderr, "pkgym keygen: unexpected argument %s\n", argv[i]);
            usage(stderr);
            return 2;
        } else
            base = argv[i];
    }
    if (!base) {
        usage(stderr);
        return 2;
    }
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
