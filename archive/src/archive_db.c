/* The archive's file: schema, open and close. WAL with synchronous=NORMAL: a committed entry
 * survives a crash of the server (not necessarily a power loss, which only loses examples, never
 * a trajectory: the trajectory store keeps every turn with synchronous=FULL). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "archive_internal.h"

static const char *const schema_sql =
    "CREATE TABLE IF NOT EXISTS archive_meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS problems(id TEXT PRIMARY KEY, title TEXT, category TEXT,"
    " tags TEXT, prompt TEXT);"
    "CREATE VIRTUAL TABLE IF NOT EXISTS problems_fts USING fts5(id UNINDEXED, title, category,"
    " tags, prompt);"
    "CREATE TABLE IF NOT EXISTS entries(id INTEGER PRIMARY KEY, problem_id TEXT NOT NULL,"
    " kernel_hash TEXT NOT NULL, world_size INTEGER NOT NULL, dims_json TEXT, code TEXT NOT NULL,"
    " plan TEXT, speedup REAL NOT NULL, roofline_share REAL NOT NULL, hardware TEXT,"
    " created_at REAL NOT NULL, source TEXT, UNIQUE(problem_id, kernel_hash));"
    "CREATE INDEX IF NOT EXISTS entries_best ON entries(problem_id, speedup DESC, created_at, id);"
    "CREATE TABLE IF NOT EXISTS uses(episode_id TEXT NOT NULL, turn INTEGER NOT NULL,"
    " rank INTEGER NOT NULL, entry_id INTEGER NOT NULL, mode TEXT NOT NULL, at REAL NOT NULL,"
    " PRIMARY KEY(episode_id, turn, rank));"
    "INSERT OR IGNORE INTO archive_meta VALUES('schema_version', '1');";

int pk_archive_db_error(pk_archive *a, pk_error *err, const char *what) {
    return pk_error_set(err, PK_ERR_IO, "archive: %s: %s", what, sqlite3_errmsg(a->db));
}

int pk_archive_exec(pk_archive *a, const char *sql, pk_error *err) {
    char *msg = NULL;
    if (sqlite3_exec(a->db, sql, NULL, NULL, &msg) == SQLITE_OK)
        return PK_OK;
    int rc = pk_error_set(err, PK_ERR_IO, "archive: %s", msg ? msg : "exec failed");
    sqlite3_free(msg);
    return rc;
}

int pk_archive_prepare(pk_archive *a, const char *sql, sqlite3_stmt **st, pk_error *err) {
    if (sqlite3_prepare_v2(a->db, sql, -1, st, NULL) != SQLITE_OK)
        return pk_archive_db_error(a, err, "prepare");
    return PK_OK;
}

void pk_archive_bind_text(sqlite3_stmt *st, int i, const char *v) {
    if (v)
        sqlite3_bind_text(st, i, v, -1, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(st, i);
}

static int check_version(pk_archive *a, const char *path, pk_error *err) {
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(a->db, "SELECT value FROM archive_meta WHERE key = 'schema_version'", -1,
                           &st, NULL) != SQLITE_OK)
        return pk_error_set(err, PK_ERR_INVALID, "'%s' is not a pkgym archive (%s)", path,
                            sqlite3_errmsg(a->db));
    int version = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int(st, 0) : 0;
    sqlite3_finalize(st);
    if (version != PK_ARCHIVE_SCHEMA_VERSION)
        return pk_error_set(err, PK_ERR_UNSUPPORTED,
                            "archive '%s' has schema version %d, this build reads %d", path,
                            version, PK_ARCHIVE_SCHEMA_VERSION);
    return PK_OK;
}

static int open_common(const char *path, int flags, pk_archive **out, pk_error *err) {
    *out = NULL;
    if (!path)
        return pk_error_set(err, PK_ERR_INVALID, "archive: no path given");
    if (!sqlite3_compileoption_used("ENABLE_FTS5"))
        return pk_error_set(err, PK_ERR_UNSUPPORTED,
                            "archive: this SQLite (%s) lacks FTS5, which retrieval needs",
                            sqlite3_libversion());
    pk_archive *a = calloc(1, sizeof *a);
    if (!a)
        return pk_error_set(err, PK_ERR_NOMEM, "archive: out of memory");
    a->readonly = (flags & SQLITE_OPEN_READONLY) != 0;
    if (sqlite3_open_v2(path, &a->db, flags, NULL) != SQLITE_OK) {
        int rc = pk_error_set(err, a->readonly ? PK_ERR_NOT_FOUND : PK_ERR_IO,
                              "archive: cannot open '%s': %s", path,
                              a->db ? sqlite3_errmsg(a->db) : "out of memory");
        pk_archive_close(a);
        return rc;
    }
    sqlite3_busy_timeout(a->db, 2000);
    *out = a;
    return PK_OK;
}

int pk_archive_open(const char *path, pk_archive **out, pk_error *err) {
    pk_archive *a;
    int rc = open_common(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, &a, err);
    if (rc)
        return rc;
    if ((rc = pk_archive_exec(a, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL", err)) ||
        (rc = pk_archive_exec(a, "BEGIN IMMEDIATE", err)))
        goto fail;
    if ((rc = pk_archive_exec(a, schema_sql, err))) {
        pk_archive_exec(a, "ROLLBACK", NULL);
        goto fail;
    }
    if ((rc = pk_archive_exec(a, "COMMIT", err)) || (rc = check_version(a, path, err)))
        goto fail;
    *out = a;
    return PK_OK;
fail:
    pk_archive_close(a);
    return rc;
}

int pk_archive_open_readonly(const char *path, pk_archive **out, pk_error *err) {
    pk_archive *a;
    int rc = open_common(path, SQLITE_OPEN_READONLY, &a, err);
    if (!rc && (rc = check_version(a, path, err))) {
        pk_archive_close(a);
        a = NULL;
    }
    *out = a;
    return rc;
}

void pk_archive_close(pk_archive *a) {
    if (!a)
        return;
    sqlite3_close(a->db);
    free(a);
}

long long pk_archive_count(pk_archive *a) {
    sqlite3_stmt *st = NULL;
    long long n = -1;
    if (sqlite3_prepare_v2(a->db, "SELECT count(*) FROM entries", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        n = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return n;
}
