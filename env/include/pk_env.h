/* pk_env: the environment server (ZeroMQ ROUTER + msgpack protocol v1) and its episodes. */
#ifndef PK_ENV_H
#define PK_ENV_H

#include <stdio.h>

#include "pk_common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PK_DEFAULT_ENDPOINT "tcp://127.0.0.1:5555"
#define PK_DEFAULT_DATA_DIR "./pkgym-data"

/* `pkgym serve` entry point. */
int pk_cmd_serve(int argc, char **argv);
/* `pkgym keygen`: a CURVE key pair (BASE.key, BASE.pub). */
int pk_cmd_keygen(int argc, char **argv);

/* `pkgym --version`: version, commit, build configuration, and the paths in use. */
void pk_print_version(FILE *f);

#ifdef __cplusplus
}
#endif
#endif
