/* pk_sandbox: runs untrusted commands (nvcc, candidate runners) in a crash-isolated sandbox. */
#ifndef PK_SANDBOX_H
#define PK_SANDBOX_H

#include "pk_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* `pkgym sandbox` entry point. */
int pk_cmd_sandbox(int argc, char **argv);

#ifdef __cplusplus
}
#endif
#endif
