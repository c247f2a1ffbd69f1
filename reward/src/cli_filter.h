/* Private to reward/: the episode filters shared by `pkgym reward` and `pkgym export`. */
#ifndef PK_CLI_FILTER_H
#define PK_CLI_FILTER_H

#include "store_reader.h"

#define PK_CLI_FILTER_USAGE                                                                        \
    "  --problem ID       only episodes of this problem; repeatable (any of them)\n"               \
    "  --group G          only episodes of this group; repeatable\n"                               \
    "  --episode ID       only this episode; repeatable\n"                                         \
    "  --since T          only episodes begun at or after T: seconds since the epoch, a UTC\n"     \
    "                     date or time (2026-11-22, 2026-11-22T10:30Z) or an age (30m, 6h, 2d)\n"

/* When argv[*i] is one of the filter options: consumes it and its value (advancing *i) and
 * returns 1; -1 when its value is missing or bad (printed, prefixed by cmd); 0 otherwise. */
int pk_cli_filter_option(const char *cmd, int argc, char **argv, int *i, pk_store_filter *f);
/* 1 when f filters anything. */
int pk_cli_filter_active(const pk_store_filter *f);

#endif
