/* Where the harness finds its pieces: next to the installed executable (pk_install.h), else
 * the build and source trees (compiled in by CMake); each overridable by environment. */
#include "pk_harness_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "pk_install.h"
#include "pk_problems.h"

static pk_harness_paths defaults;
static pthread_once_t defaults_once = PTHREAD_ONCE_INIT;

static void defaults_init(void) {
    pk_harness_paths *d = &defaults;
    pk_install_path(PK_INSTALL_DATA, "problems", PK_PROBLEMS_ROOT, d->root, sizeof d->root);
    pk_install_path(PK_INSTALL_MODULES, "", PK_MODULE_DIR, d->module_dir, sizeof d->module_dir);
    pk_install_path(PK_INSTALL_LIBEXEC, "pk-runner", PK_RUNNER_PATH, d->runner, sizeof d->runner);
    pk_install_path(PK_INSTALL_DATA, "include/candidate", PK_CANDIDATE_INCLUDE, d->include_dir,
                    sizeof d->include_dir);
    snprintf(d->hardware_json, sizeof d->hardware_json, "%.490s/hardware.json", d->root);
}

static const pk_harness_paths *harness_defaults(void) {
    pthread_once(&defaults_once, defaults_init);
    return &defaults;
}

const char *pk_problems_default_dir(void) {
    return harness_defaults()->root;
}

const char *pk_problems_default_modules_dir(void) {
    return harness_defaults()->module_dir;
}

static void pick(char *dst, size_t cap, const char *env, const char *def) {
    const char *v = getenv(env);
    if (snprintf(dst, cap, "%s", v && *v ? v : def) >= (int)cap)
        fprintf(stderr, "pkgym: %s: path longer than %zu bytes, cut\n", env, cap - 1);
}

void pk_harness_paths_get(pk_harness_paths *out) {
    const pk_harness_paths *d = harness_defaults();
    pick(out->root, sizeof out->root, "PKGYM_PROBLEMS_ROOT", d->root);
    pick(out->module_dir, sizeof out->module_dir, "PKGYM_MODULE_DIR", d->module_dir);
    pick(out->runner, sizeof out->runner, "PKGYM_RUNNER", d->runner);
    pick(out->include_dir, sizeof out->include_dir, "PKGYM_CANDIDATE_INCLUDE", d->include_dir);
    pick(out->hardware_json, sizeof out->hardware_json, "PKGYM_HARDWARE_JSON", d->hardware_json);
}
