/* Private to reward/: the episode filters shared by `pkgym reward` and `pkgym export`. */
#ifndef PK_CLI_FILTER_H
#define PK_CLI_FILTER_H

#include "pk_opts.h"
#include "store_reader.h"

/* --problem, --group, --episode, --since, under a heading: rows of a pk_opts table. */
enum { PK_CLI_FILTER_ROWS = 5 };

/* Fills rows[0..PK_CLI_FILTER_ROWS) with the filter options, writing into f. */
void pk_cli_filter_rows(pk_opt *rows, pk_store_filter *f);
/* 1 when f filters anything. */
int pk_cli_filter_active(const pk_store_filter *f);

#endif
