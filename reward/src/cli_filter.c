/* --problem, --group, --episode and --since of `pkgym reward` and `pkgym export`. */
#include "cli_filter.h"

#include <stdio.h>
#include <string.h>

static int add(const char *cmd, const char *opt, const char **list, int *n, const char *value) {
    if (*n >= PK_STORE_FILTER_MAX) {
        fprintf(stderr, "%s: at most %d %s\n", cmd, PK_STORE_FILTER_MAX, opt);
        return -1;
    }
    list[(*n)++] = value;
    return 1;
}

int pk_cli_filter_option(const char *cmd, int argc, char **argv, int *i, pk_store_filter *f) {
    const char *opt = argv[*i];
    int is_filter = !strcmp(opt, "--problem") || !strcmp(opt, "--group") ||
                    !strcmp(opt, "--episode") || !strcmp(opt, "--since");
    if (!is_filter)
        return 0;
    if (*i + 1 >= argc || !argv[*i + 1][0]) {
        fprintf(stderr, "%s: %s needs a value\n", cmd, opt);
        return -1;
    }
    const char *v = argv[++*i];
    if (!strcmp(opt, "--problem"))
        return add(cmd, opt, f->problems, &f->n_problems, v);
    if (!strcmp(opt, "--group"))
        return add(cmd, opt, f->groups, &f->n_groups, v);
    if (!strcmp(opt, "--episode"))
        return add(cmd, opt, f->episodes, &f->n_episodes, v);
    pk_error err;
    if (pk_store_parse_since(v, pk_wall_time_s(), &f->since, &err)) {
        fprintf(stderr, "%s: %s\n", cmd, err.message);
        return -1;
    }
    return 1;
}

int pk_cli_filter_active(const pk_store_filter *f) {
    return f->n_problems || f->n_groups || f->n_episodes || f->since > 0;
}
