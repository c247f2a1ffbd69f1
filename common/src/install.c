/* Locating the installed tree from the running executable (see pk_install.h). */
#include "pk_install.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Relative to the directory of the installed `pkgym` (CMAKE_INSTALL_BINDIR), computed by CMake
 * from GNUInstallDirs; defaults for builds that did not set them. */
#ifndef PK_INSTALL_REL_DATA
#define PK_INSTALL_REL_DATA "../share/pkgym"
#endif
#ifndef PK_INSTALL_REL_LIBEXEC
#define PK_INSTALL_REL_LIBEXEC "../libexec/pkgym"
#endif
#ifndef PK_INSTALL_REL_MODULES
#define PK_INSTALL_REL_MODULES "../lib/pkgym/modules"
#endif

static int is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The directory of the running executable, symlinks resolved. */
static int exe_dir(char *out, size_t cap) {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0)
        return 0;
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (!slash)
        return 0;
    *slash = 0;
    return snprintf(out, cap, "%s", exe[0] ? exe : "/") < (int)cap;
}

/* An absolute directory (an install dir given as an absolute path) is used as it is. */
static int join(char *out, size_t cap, const char *base, const char *rel) {
    int n = rel[0] == '/' ? snprintf(out, cap, "%s", rel) : snprintf(out, cap, "%s/%s", base, rel);
    return n > 0 && (size_t)n < cap;
}

int pk_install_dir_get(pk_install_dir which, char *out, size_t cap) {
    char bin[PATH_MAX], data[PATH_MAX], probe[PATH_MAX];
    if (cap)
        out[0] = 0;
    if (!exe_dir(bin, sizeof bin) || !join(data, sizeof data, bin, PK_INSTALL_REL_DATA) ||
        !join(probe, sizeof probe, data, "problems") || !is_dir(probe))
        return 0;
    const char *rel = which == PK_INSTALL_DATA      ? PK_INSTALL_REL_DATA
                      : which == PK_INSTALL_LIBEXEC ? PK_INSTALL_REL_LIBEXEC
                                                    : PK_INSTALL_REL_MODULES;
    char path[PATH_MAX], real[PATH_MAX];
    if (!join(path, sizeof path, bin, rel))
        return 0;
    /* "bin/../share/pkgym" -> "share/pkgym": paths in messages and sandbox binds stay short. */
    const char *use = realpath(path, real) ? real : path;
    if (snprintf(out, cap, "%s", use) >= (int)cap) {
        out[0] = 0;
        return 0;
    }
    return 1;
}

int pk_install_path(pk_install_dir which, const char *rel, const char *build_default, char *dst,
                    size_t cap) {
    char dir[PATH_MAX];
    if (pk_install_dir_get(which, dir, sizeof dir) &&
        (rel && rel[0] ? snprintf(dst, cap, "%s/%s", dir, rel) : snprintf(dst, cap, "%s", dir)) <
            (int)cap)
        return 1;
    snprintf(dst, cap, "%s", build_default);
    return 0;
}
