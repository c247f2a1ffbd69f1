/* Where Nsight Compute lives, for the profile stage's sandbox. The toolkit's `ncu` is a wrapper
 * script that runs the real frontend from an Nsight Compute directory beside the toolkit
 * (<cuda>/nsight-compute-<version>) or under /opt/nvidia; the sandbox shows only the toolchain,
 * so without these binds ncu says "Nsight Compute is not installed on your system" (seen on
 * an H200 host, 2026-11-29). */
#define _GNU_SOURCE
#include "pk_profile.h"

#include <glob.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int add_matches(const char *pattern, char (*out)[PATH_MAX], int n, int cap) {
    glob_t g;
    if (glob(pattern, GLOB_ONLYDIR, NULL, &g) != 0)
        return n;
    for (size_t i = 0; i < g.gl_pathc && n < cap; i++) {
        char real[PATH_MAX];
        if (!realpath(g.gl_pathv[i], real))
            continue;
        int dup = 0;
        for (int j = 0; j < n; j++)
            dup |= !strcmp(out[j], real);
        if (!dup)
            snprintf(out[n++], PATH_MAX, "%s", real);
    }
    globfree(&g);
    return n;
}

int pk_profile_ncu_dirs(const char *ncu, const char *opt_root, char (*out)[PATH_MAX], int cap) {
    char real[PATH_MAX], pattern[PATH_MAX + 32];
    int n = 0;
    if (!ncu || !realpath(ncu, real))
        return 0;
    char *bin = dirname(real); /* <cuda>/bin, or the Nsight Compute directory itself */
    if (strstr(bin, "nsight-compute")) {
        snprintf(pattern, sizeof pattern, "%s", bin);
        n = add_matches(pattern, out, n, cap);
    }
    snprintf(pattern, sizeof pattern, "%s/../nsight-compute*", bin);
    n = add_matches(pattern, out, n, cap);
    snprintf(pattern, sizeof pattern, "%s/nsight-compute*", opt_root ? opt_root : "/opt/nvidia");
    return add_matches(pattern, out, n, cap);
}
