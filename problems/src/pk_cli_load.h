/* Internal: shared by `pkgym check` and `pkgym problems`. */
#ifndef PK_CLI_LOAD_H
#define PK_CLI_LOAD_H

#include "pk_harness_internal.h"

/* Prints the error and returns -1 when the suite cannot be loaded. */
int pk_cli_load_problems(pk_problem_set **out);

#endif
