/* Where the harness finds its pieces: compiled in by CMake, overridable by environment. */
#include "pk_harness_internal.h"

#include <stdio.h>
#include <stdlib.h>

static void pick(char *dst, size_t cap, const char *env, const char *def) {
    const char *v = getenv(env);
    snprintf(dst, cap, "%s", v && *v ? v : def);
}

void pk_harness_paths_get(pk_harness_paths *out) {
    pick(out->root, sizeof out->root, "PKGYM_PROBLEMS_ROOT", PK_PROBLEMS_ROOT);
    pick(out->module_dir, sizeof out->module_dir, "PKGYM_MODULE_DIR", PK_MODULE_DIR);
    pick(out->runner, sizeof out->runner, "PKGYM_RUNNER", PK_RUNNER_PATH);
    pick(out->include_dir, sizeof out->include_dir, "PKGYM_CANDIDATE_INCLUDE",
         PK_CANDIDATE_INCLUDE);
    pick(out->hardware_json, sizeof out->hardware_json, "PKGYM_HARDWARE_JSON",
         PK_PROBLEMS_ROOT "/hardware.json");
}
