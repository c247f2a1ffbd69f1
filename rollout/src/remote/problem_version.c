/* Problem versions and module presence (pk_problem_version.h). */
#include "pk_problem_version.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_problem_spec.h"

void pk_problem_version(const pk_problem *p, char out[PK_PROBLEM_VERSION_LEN + 1]) {
    pk_sha256 h;
    pk_sha256_init(&h);
    const char *meta = pk_problem_meta_json(p);
    pk_sha256_update(&h, meta ? meta : "", meta ? strlen(meta) + 1 : 1);
    char *path = pk_path_join(pk_problem_dir(p), "problem.cu");
    char *text = NULL;
    size_t len = 0;
    if (path && pk_read_file(path, &text, &len, NULL) == PK_OK)
        pk_sha256_update(&h, text, len);
    free(text);
    free(path);
    uint8_t d[32];
    pk_sha256_final(&h, d);
    for (int i = 0; i < PK_PROBLEM_VERSION_LEN / 2; i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
}

int pk_problem_module_present(const pk_problem *p, char *reason, size_t cap) {
    if (!p->module_path) {
        snprintf(reason, cap, "no module directory was given");
        return 0;
    }
    if (!pk_path_exists(p->module_path)) {
        snprintf(reason, cap, "module %s is not built", p->module_path);
        return 0;
    }
    return 1;
}
