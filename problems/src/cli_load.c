/* Loads the problem set for the CLI commands from the configured paths. */
#include "pk_cli_load.h"

#include <stdio.h>

int pk_cli_load_problems(pk_problem_set **out) {
    pk_harness_paths paths;
    pk_harness_paths_get(&paths);
    pk_error err;
    if (pk_problem_set_load(paths.root, paths.module_dir, out, &err)) {
        fprintf(stderr, "pkgym: %s\n", err.message);
        return -1;
    }
    return 0;
}
