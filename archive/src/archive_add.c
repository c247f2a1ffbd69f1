/* Entering a kernel: one row per (problem, kernel hash), the problem's text kept for
 * similarity (problems, and its FTS5 index problems_fts). */
#include <ctype.h>
#include <math.h>
#include <string.h>

#include "archive_internal.h"

void pk_archive_kernel_hash(const char *code, char out[65]) {
    const char *b = code ? code : "";
    const char *e = b + strlen(b);
    while (b < e && isspace((unsigned char)*b))
        b++;
    while (e > b && isspace((unsigned char)e[-1]))
        e--;
    pk_sha256_hex(b, (size_t)(e - b), out);
}

/* Stores p's text and re-indexes it, unless the archive has exactly this text already. */
static int put_problem(pk_archive *a, const pk_archive_problem *p, pk_error *err) {
    sqlite3_stmt *st = NULL;
    int rc = pk_archive_prepare(a,
                                "SELECT 1 FROM problems WHERE id = ?1 AND title IS ?2 AND"
                                " category IS ?3 AND tags IS ?4 AND prompt IS ?5",
                                &st, err);
    if (rc)
        return rc;
    const char *fields[] = {p->id, p->title, p->category, p->tags, p->prompt};
    for (int i = 0; i < 5; i++)
        pk_archive_bind_text(st, i + 1, fields[i]);
    int same = sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    if (same)
        return PK_OK;
    const char *sql[] = {"INSERT OR REPLACE INTO problems(id, title, category, tags, prompt)"
                         " VALUES(?1, ?2, ?3, ?4, ?5)",
                         "DELETE FROM problems_fts WHERE id = ?1",
                         "INSERT INTO problems_fts(id, title, category, tags, prompt)"
                         " VALUES(?1, ?2, ?3, ?4, ?5)"};
    for (int s = 0; s < 3 && !rc; s++) {
        if ((rc = pk_archive_prepare(a, sql[s], &st, err)))
            break;
        for (int i = 0; i < (s == 1 ? 1 : 5); i++)
            pk_archive_bind_text(st, i + 1, fields[i]);
        if (sqlite3_step(st) != SQLITE_DONE)
            rc = pk_archive_db_error(a, err, "store the problem's text");
        sqlite3_finalize(st);
    }
    return rc;
}

static int problem_known(pk_archive *a, const char *id, pk_error *err) {
    sqlite3_stmt *st = NULL;
    int rc = pk_archive_prepare(a, "SELECT 1 FROM problems WHERE id = ?", &st, err);
    if (rc)
        return rc;
    pk_archive_bind_text(st, 1, id);
    int known = sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    return known ? PK_OK
                 : pk_error_set(err, PK_ERR_INVALID,
                                "archive: problem '%s' has no text in the archive; give its "
                                "title, category, tags and prompt",
                                id);
}

static int check_entry(const pk_archive_entry *e, pk_error *err) {
    if (!e->problem_id || !e->problem_id[0] || !e->code || !e->code[0])
        return pk_error_set(err, PK_ERR_INVALID, "archive: an entry needs a problem and code");
    if (e->world_size < 1 || e->world_size > 4096)
        return pk_error_set(err, PK_ERR_INVALID, "archive: world size %d out of [1, 4096]",
                            e->world_size);
    if (!isfinite(e->speedup) || e->speedup < 0 || !isfinite(e->roofline_share) ||
        e->roofline_share < 0)
        return pk_error_set(err, PK_ERR_INVALID,
                            "archive: speedup and roofline share must be finite and >= 0");
    return PK_OK;
}

/* The row of (problem, hash): its id and speedup; *id 0 when there is none. */
static int find_row(pk_archive *a, const char *problem, const char *hash, long long *id,
                    double *speedup, pk_error *err) {
    sqlite3_stmt *st = NULL;
    int rc = pk_archive_prepare(
        a, "SELECT id, speedup FROM entries WHERE problem_id = ? AND kernel_hash = ?", &st, err);
    if (rc)
        return rc;
    pk_archive_bind_text(st, 1, problem);
    pk_archive_bind_text(st, 2, hash);
    *id = 0;
    if (sqlite3_step(st) == SQLITE_ROW) {
        *id = sqlite3_column_int64(st, 0);
        *speedup = sqlite3_column_double(st, 1);
    }
    sqlite3_finalize(st);
    return PK_OK;
}

static int write_row(pk_archive *a, const pk_archive_entry *e, const char *hash, long long id,
                     pk_error *err) {
    sqlite3_stmt *st = NULL;
    int rc = pk_archive_prepare(
        a,
        id ? "UPDATE entries SET world_size = ?3, dims_json = ?4, code = ?5,"
             " plan = COALESCE(?6, plan), speedup = ?7, roofline_share = ?8, hardware = ?9,"
             " created_at = ?10, source = ?11 WHERE problem_id = ?1 AND kernel_hash = ?2"
           : "INSERT INTO entries(problem_id, kernel_hash, world_size, dims_json, code, plan,"
             " speedup, roofline_share, hardware, created_at, source)"
             " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
        &st, err);
    if (rc)
        return rc;
    pk_archive_bind_text(st, 1, e->problem_id);
    pk_archive_bind_text(st, 2, hash);
    sqlite3_bind_int(st, 3, e->world_size);
    pk_archive_bind_text(st, 4, e->dims_json);
    pk_archive_bind_text(st, 5, e->code);
    pk_archive_bind_text(st, 6, e->plan && e->plan[0] ? e->plan : NULL);
    sqlite3_bind_double(st, 7, e->speedup);
    sqlite3_bind_double(st, 8, e->roofline_share);
    pk_archive_bind_text(st, 9, e->hardware);
    sqlite3_bind_double(st, 10, e->created_at > 0 ? e->created_at : pk_wall_time_s());
    pk_archive_bind_text(st, 11, e->source);
    if (sqlite3_step(st) != SQLITE_DONE)
        rc = pk_archive_db_error(a, err, "store the entry");
    sqlite3_finalize(st);
    return rc;
}

int pk_archive_add(pk_archive *a, const pk_archive_problem *p, const pk_archive_entry *e,
                   long long *id_out, int *added_out, pk_error *err) {
    if (!a || a->readonly)
        return pk_error_set(err, PK_ERR_INVALID, "archive: not open for writing");
    int rc = check_entry(e, err);
    if (rc)
        return rc;
    if (p && (!p->id || strcmp(p->id, e->problem_id) != 0))
        return pk_error_set(err, PK_ERR_INVALID, "archive: the entry's problem is not '%s'",
                            p->id ? p->id : "(none)");
    char hash[65];
    pk_archive_kernel_hash(e->code, hash);
    if ((rc = pk_archive_exec(a, "BEGIN IMMEDIATE", err)))
        return rc;
    long long id = 0;
    double old_speedup = 0;
    rc = p ? put_problem(a, p, err) : problem_known(a, e->problem_id, err);
    if (!rc)
        rc = find_row(a, e->problem_id, hash, &id, &old_speedup, err);
    int added = !rc && id == 0;
    /* The same kernel again: one row, with the better measurement. */
    if (!rc && (added || e->speedup > old_speedup))
        rc = write_row(a, e, hash, id, err);
    if (!rc && added)
        id = sqlite3_last_insert_rowid(a->db);
    if (!rc)
        rc = pk_archive_exec(a, "COMMIT", err);
    if (rc) {
        pk_archive_exec(a, "ROLLBACK", NULL);
        return rc;
    }
    if (id_out)
        *id_out = id;
    if (added_out)
        *added_out = added;
    return PK_OK;
}
