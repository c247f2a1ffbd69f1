/* --problem, --group, --episode and --since of `pkgym reward` and `pkgym export`. */
#include "cli_filter.h"

#include <stdio.h>
#include <string.h>

static int parse_since(const char *cmd, const char *name, const char *value, void *dest) {
    pk_error err;
    if (pk_store_parse_since(value, pk_wall_time_s(), (double *)dest, &err)) {
        fprintf(stderr, "pkgym %s: %s: %s\n", cmd, name, err.message);
        return -1;
    }
    return 0;
}

void pk_cli_filter_rows(pk_opt *rows, pk_store_filter *f) {
    const pk_opt r[PK_CLI_FILTER_ROWS] = {
        {.type = PK_OPT_SECTION, .help = "Which episodes (all of them by default):"},
        {.type = PK_OPT_STR_LIST,
         .name = "--problem",
         .metavar = "ID",
         .help = "only episodes of this problem; repeatable (any of them)",
         .dest = f->problems,
         .count = &f->n_problems,
         .max = PK_STORE_FILTER_MAX},
        {.type = PK_OPT_STR_LIST,
         .name = "--group",
         .metavar = "G",
         .help = "only episodes of this group; repeatable",
         .dest = f->groups,
         .count = &f->n_groups,
         .max = PK_STORE_FILTER_MAX},
        {.type = PK_OPT_STR_LIST,
         .name = "--episode",
         .metavar = "ID",
         .help = "only this episode; repeatable",
         .dest = f->episodes,
         .count = &f->n_episodes,
         .max = PK_STORE_FILTER_MAX},
        {.type = PK_OPT_CUSTOM,
         .name = "--since",
         .metavar = "T",
         .help = "only episodes begun at or after T: seconds since the epoch, a UTC\n"
                 "date or time (2026-11-22, 2026-11-22T10:30Z) or an age (30m, 6h, 2d)",
         .dest = &f->since,
         .parse = parse_since},
    };
    memcpy(rows, r, sizeof r);
}

int pk_cli_filter_active(const pk_store_filter *f) {
    return f->n_problems || f->n_groups || f->n_episodes || f->since > 0;
}
