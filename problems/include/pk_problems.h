/* pk_problems: the problem suite (loader) and the kernel harness that measures submissions. */
#ifndef PK_PROBLEMS_H
#define PK_PROBLEMS_H

#include "pk_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* `pkgym check` and `pkgym problems` entry points. */
int pk_cmd_check(int argc, char **argv);
int pk_cmd_problems(int argc, char **argv);

#ifdef __cplusplus
}
#endif
#endif
