/* pk_reward: per-turn scores, discounted returns, the trajectory store, metrics and ablation. */
#ifndef PK_REWARD_H
#define PK_REWARD_H

#include "pk_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* `pkgym reward` and `pkgym export` entry points. */
int pk_cmd_reward(int argc, char **argv);
int pk_cmd_export(int argc, char **argv);

#ifdef __cplusplus
}
#endif
#endif
