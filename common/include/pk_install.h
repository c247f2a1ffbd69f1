/* pk_install: where pkgym's own files are after `cmake --install` (FHS layout, any --prefix).
 *
 * An installed pkgym finds its problems, modules, runner and templates relative to its own
 * executable (/proc/self/exe), so the prefix chosen at install time and a moved installed tree
 * both work. A build-tree executable has no such tree next to it and uses the paths baked in at
 * build time. Environment variables (PKGYM_PROBLEMS_ROOT, ...) override both. */
#ifndef PK_INSTALL_H
#define PK_INSTALL_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum pk_install_dir {
    PK_INSTALL_DATA,    /* <prefix>/share/pkgym: problems/, templates/, include/candidate/ */
    PK_INSTALL_LIBEXEC, /* <prefix>/libexec/pkgym: pk-runner, pk_summarizer_hook_host */
    PK_INSTALL_MODULES, /* <prefix>/lib/pkgym/modules: the compiled problem modules */
} pk_install_dir;

/* Writes `which` of the installed tree the running executable belongs to into out and returns
 * 1; returns 0 (out = "") when the executable is not an installed pkgym (a build tree). An
 * installed tree is recognised by <data>/problems being a directory. */
int pk_install_dir_get(pk_install_dir which, char *out, size_t cap);

/* dst = the installed `which` joined with rel when installed, else build_default (baked in).
 * Returns 1 when installed. */
int pk_install_path(pk_install_dir which, const char *rel, const char *build_default, char *dst,
                    size_t cap);

#ifdef __cplusplus
}
#endif
#endif
