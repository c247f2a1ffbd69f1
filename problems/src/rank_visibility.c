/* Which GPUs a GPU job's rank processes see: all the job's (the default) or only their own
 * (--rank-visibility own, issue 30 lever 1). The runner applies it (problems/runner/visible.c). */
#include "pk_harness.h"

#include <stdlib.h>
#include <string.h>

int pk_rank_visibility_parse(const char *name) {
    if (name && !strcmp(name, "all"))
        return PK_RANK_VISIBILITY_ALL;
    if (name && !strcmp(name, "own"))
        return PK_RANK_VISIBILITY_OWN;
    return -1;
}

int pk_rank_visibility_of(const pk_eval_opts *opts) {
    if (opts && opts->rank_visibility == PK_RANK_VISIBILITY_OWN)
        return PK_RANK_VISIBILITY_OWN;
    if (opts && opts->rank_visibility == PK_RANK_VISIBILITY_ALL)
        return PK_RANK_VISIBILITY_ALL;
    return pk_rank_visibility_parse(getenv("PKGYM_RANK_VISIBILITY")) == PK_RANK_VISIBILITY_OWN
               ? PK_RANK_VISIBILITY_OWN
               : PK_RANK_VISIBILITY_ALL;
}
