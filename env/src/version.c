/* `pkgym --version`: the version, how this binary was built and where it finds its files. */
#include <limits.h>
#include <stdio.h>

#include "pk_build_config.h"
#include "pk_env.h"
#include "pk_git_info.h"
#include "pk_install.h"
#include "pk_problems.h"
#include "pk_summarizer.h"

void pk_print_version(FILE *f) {
    char data[PATH_MAX];
    int installed = pk_install_dir_get(PK_INSTALL_DATA, data, sizeof data);
    fprintf(f, "pkgym %s\n", PK_VERSION);
    fprintf(f, "protocol:  1\n");
    fprintf(f, "commit:    %s\n", PK_GIT_COMMIT);
    fprintf(f, "build:     %s, %s, sanitizers %s, %s\n", PK_BUILD_TYPE, PK_BUILD_COMPILER,
            PK_BUILD_SANITIZERS, PK_BUILD_SYSTEM);
    fprintf(f, "cuda:      %s (architectures %s), nccl %s\n", PK_BUILD_CUDA, PK_BUILD_CUDA_ARCHS,
            PK_BUILD_NCCL);
    if (installed)
        fprintf(f, "layout:    installed, %s\n", data);
    else
        fprintf(f, "layout:    build tree (configured install prefix %s)\n",
                PK_BUILD_INSTALL_PREFIX);
    fprintf(f, "problems:  %s\n", pk_problems_default_dir());
    fprintf(f, "modules:   %s\n", pk_problems_default_modules_dir());
    fprintf(f, "templates: %s\n", pk_summarizer_default_templates_dir());
}
