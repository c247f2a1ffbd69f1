/* Private to archive/: the connection and the helpers its files share. */
#ifndef PK_ARCHIVE_INTERNAL_H
#define PK_ARCHIVE_INTERNAL_H

#include <sqlite3.h>

#include "pk_archive.h"

#define PK_ARCHIVE_SCHEMA_VERSION 1

struct pk_archive {
    sqlite3 *db;
    int readonly;
};

int pk_archive_db_error(pk_archive *a, pk_error *err, const char *what);
int pk_archive_exec(pk_archive *a, const char *sql, pk_error *err);
int pk_archive_prepare(pk_archive *a, const char *sql, sqlite3_stmt **st, pk_error *err);
void pk_archive_bind_text(sqlite3_stmt *st, int i, const char *v);

/* The columns every entry query selects, in the order pk_archive_entry_from_row reads them. */
#define PK_ARCHIVE_ENTRY_COLUMNS                                                                   \
    "id, problem_id, kernel_hash, world_size, dims_json, code, plan, speedup, roofline_share,"     \
    " hardware, created_at, source"
/* Appends the current row of st to l (strings copied). */
int pk_archive_list_append_row(pk_archive_list *l, sqlite3_stmt *st);
/* Steps st to its end, appending every row; resets nothing. */
int pk_archive_list_collect(pk_archive *a, sqlite3_stmt *st, pk_archive_list *l, pk_error *err);

#endif
