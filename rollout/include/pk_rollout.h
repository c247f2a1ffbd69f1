/* pk_rollout: job scheduling, compile and baseline caches, `pkgym eval`, and the C client. */
#ifndef PK_ROLLOUT_H
#define PK_ROLLOUT_H

#include "pk_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* `pkgym eval` entry point. */
int pk_cmd_eval(int argc, char **argv);

#ifdef __cplusplus
}
#endif
#endif
