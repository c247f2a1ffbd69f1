/* Reading entries back: lists, one entry, a problem's text. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "archive_internal.h"

static char *column_dup(sqlite3_stmt *st, int i) {
    const unsigned char *t = sqlite3_column_text(st, i);
    return t ? strdup((const char *)t) : NULL;
}

static void entry_free(pk_archive_entry *e) {
    free((char *)e->problem_id);
    free((char *)e->dims_json);
    free((char *)e->code);
    free((char *)e->plan);
    free((char *)e->hardware);
    free((char *)e->source);
}

int pk_archive_list_append_row(pk_archive_list *l, sqlite3_stmt *st) {
    pk_archive_entry *grown = realloc(l->items, (size_t)(l->n + 1) * sizeof *grown);
    if (!grown)
        return PK_ERR_NOMEM;
    l->items = grown;
    pk_archive_entry *e = &l->items[l->n];
    memset(e, 0, sizeof *e);
    e->id = sqlite3_column_int64(st, 0);
    e->problem_id = column_dup(st, 1);
    const unsigned char *hash = sqlite3_column_text(st, 2);
    snprintf(e->kernel_hash, sizeof e->kernel_hash, "%s", hash ? (const char *)hash : "");
    e->world_size = sqlite3_column_int(st, 3);
    e->dims_json = column_dup(st, 4);
    e->code = column_dup(st, 5);
    e->plan = column_dup(st, 6);
    e->speedup = sqlite3_column_double(st, 7);
    e->roofline_share = sqlite3_column_double(st, 8);
    e->hardware = column_dup(st, 9);
    e->created_at = sqlite3_column_double(st, 10);
    e->source = column_dup(st, 11);
    l->n++;
    if (!e->problem_id || !e->code)
        return PK_ERR_NOMEM;
    return PK_OK;
}

int pk_archive_list_collect(pk_archive *a, sqlite3_stmt *st, pk_archive_list *l, pk_error *err) {
    int step;
    while ((step = sqlite3_step(st)) == SQLITE_ROW)
        if (pk_archive_list_append_row(l, st))
            return pk_error_set(err, PK_ERR_NOMEM, "archive: out of memory");
    return step == SQLITE_DONE ? PK_OK : pk_archive_db_error(a, err, "read entries");
}

void pk_archive_list_free(pk_archive_list *l) {
    if (!l)
        return;
    for (int i = 0; i < l->n; i++)
        entry_free(&l->items[i]);
    free(l->items);
    l->items = NULL;
    l->n = 0;
}

int pk_archive_query(pk_archive *a, const char *problem_id, int limit, pk_archive_list *out,
                     pk_error *err) {
    memset(out, 0, sizeof *out);
    sqlite3_stmt *st = NULL;
    int rc = pk_archive_prepare(a,
                                "SELECT " PK_ARCHIVE_ENTRY_COLUMNS " FROM entries"
                                " WHERE ?1 IS NULL OR problem_id = ?1"
                                " ORDER BY problem_id, speedup DESC, created_at, id LIMIT ?2",
                                &st, err);
    if (rc)
        return rc;
    pk_archive_bind_text(st, 1, problem_id);
    sqlite3_bind_int64(st, 2, limit > 0 ? limit : -1);
    rc = pk_archive_list_collect(a, st, out, err);
    sqlite3_finalize(st);
    if (rc)
        pk_archive_list_free(out);
    return rc;
}

int pk_archive_get(pk_archive *a, long long id, pk_archive_list *out, pk_error *err) {
    memset(out, 0, sizeof *out);
    sqlite3_stmt *st = NULL;
    int rc = pk_archive_prepare(a, "SELECT " PK_ARCHIVE_ENTRY_COLUMNS " FROM entries WHERE id = ?",
                                &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, id);
    rc = pk_archive_list_collect(a, st, out, err);
    sqlite3_finalize(st);
    if (rc)
        pk_archive_list_free(out);
    return rc;
}

int pk_archive_problem_get(pk_archive *a, const char *problem_id, pk_archive_problem *out,
                           pk_error *err) {
    memset(out, 0, sizeof *out);
    sqlite3_stmt *st = NULL;
    int rc = pk_archive_prepare(
        a, "SELECT id, title, category, tags, prompt FROM problems WHERE id = ?", &st, err);
    if (rc)
        return rc;
    pk_archive_bind_text(st, 1, problem_id);
    if (sqlite3_step(st) == SQLITE_ROW) {
        out->id = column_dup(st, 0);
        out->title = column_dup(st, 1);
        out->category = column_dup(st, 2);
        out->tags = column_dup(st, 3);
        out->prompt = column_dup(st, 4);
        if (!out->id)
            rc = pk_error_set(err, PK_ERR_NOMEM, "archive: out of memory");
    } else {
        rc = pk_error_set(err, PK_ERR_NOT_FOUND, "archive: no problem '%s'", problem_id);
    }
    sqlite3_finalize(st);
    if (rc)
        pk_archive_problem_free(out);
    return rc;
}

void pk_archive_problem_free(pk_archive_problem *p) {
    if (!p)
        return;
    free((char *)p->id);
    free((char *)p->title);
    free((char *)p->category);
    free((char *)p->tags);
    free((char *)p->prompt);
    memset(p, 0, sizeof *p);
}
