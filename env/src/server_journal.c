/* The server journal (server_journal.h). */
#include "server_journal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

struct pk_journal {
    sqlite3 *db;
    sqlite3_stmt *begin, *end, *closed, *is_closed, *step_of;
};

static const char *const schema =
    "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
    "CREATE TABLE IF NOT EXISTS in_flight(episode_id TEXT PRIMARY KEY, turn INTEGER NOT NULL,"
    " started_at REAL NOT NULL);"
    "CREATE TABLE IF NOT EXISTS closed(episode_id TEXT PRIMARY KEY, closed_at REAL NOT NULL);";

int pk_journal_open(const char *data_dir, pk_journal **out, pk_error *err) {
    *out = NULL;
    char *path = pk_path_join(data_dir, "server-journal.sqlite");
    pk_journal *j = calloc(1, sizeof *j);
    if (!path || !j) {
        free(path);
        free(j);
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    }
    int rc = sqlite3_open_v2(path, &j->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);
    char *msg = NULL;
    if (rc == SQLITE_OK) {
        sqlite3_busy_timeout(j->db, 1000);
        rc = sqlite3_exec(j->db, schema, NULL, NULL, &msg);
    }
    if (rc == SQLITE_OK)
        rc =
            sqlite3_prepare_v2(j->db,
                               "INSERT OR REPLACE INTO in_flight(episode_id, turn, started_at)"
                               " VALUES(?,?,?)",
                               -1, &j->begin, NULL) ||
            sqlite3_prepare_v2(j->db, "DELETE FROM in_flight WHERE episode_id = ?", -1, &j->end,
                               NULL) ||
            sqlite3_prepare_v2(j->db,
                               "INSERT OR REPLACE INTO closed(episode_id, closed_at) VALUES(?,?)",
                               -1, &j->closed, NULL) ||
            sqlite3_prepare_v2(j->db, "SELECT 1 FROM closed WHERE episode_id = ?", -1,
                               &j->is_closed, NULL) ||
            sqlite3_prepare_v2(j->db, "SELECT turn, started_at FROM in_flight WHERE episode_id = ?",
                               -1, &j->step_of, NULL);
    if (rc != SQLITE_OK) {
        pk_error_set(err, PK_ERR_IO, "server journal %s: %s", path,
                     msg ? msg : (j->db ? sqlite3_errmsg(j->db) : "cannot open"));
        sqlite3_free(msg);
        free(path);
        pk_journal_close(j);
        return PK_ERR_IO;
    }
    free(path);
    *out = j;
    return PK_OK;
}

void pk_journal_close(pk_journal *j) {
    if (!j)
        return;
    sqlite3_finalize(j->begin);
    sqlite3_finalize(j->end);
    sqlite3_finalize(j->closed);
    sqlite3_finalize(j->is_closed);
    sqlite3_finalize(j->step_of);
    sqlite3_close(j->db);
    free(j);
}

static void run(pk_journal *j, sqlite3_stmt *st, const char *what) {
    if (sqlite3_step(st) != SQLITE_DONE)
        fprintf(stderr, "pkgym serve: server journal: %s: %s\n", what, sqlite3_errmsg(j->db));
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
}

void pk_journal_step_begin(pk_journal *j, const char *episode, int turn, double started_at) {
    if (!j)
        return;
    sqlite3_bind_text(j->begin, 1, episode, -1, SQLITE_STATIC);
    sqlite3_bind_int(j->begin, 2, turn);
    sqlite3_bind_double(j->begin, 3, started_at);
    run(j, j->begin, "step begin");
}

void pk_journal_step_end(pk_journal *j, const char *episode) {
    if (!j)
        return;
    sqlite3_bind_text(j->end, 1, episode, -1, SQLITE_STATIC);
    run(j, j->end, "step end");
}

void pk_journal_closed(pk_journal *j, const char *episode) {
    if (!j)
        return;
    pk_journal_step_end(j, episode);
    sqlite3_bind_text(j->closed, 1, episode, -1, SQLITE_STATIC);
    sqlite3_bind_double(j->closed, 2, pk_wall_time_s());
    run(j, j->closed, "close");
}

int pk_journal_is_closed(pk_journal *j, const char *episode) {
    sqlite3_bind_text(j->is_closed, 1, episode, -1, SQLITE_STATIC);
    int closed = sqlite3_step(j->is_closed) == SQLITE_ROW;
    sqlite3_reset(j->is_closed);
    sqlite3_clear_bindings(j->is_closed);
    return closed;
}

pk_journal_step pk_journal_step_of(pk_journal *j, const char *episode) {
    pk_journal_step s = {-1, 0};
    sqlite3_bind_text(j->step_of, 1, episode, -1, SQLITE_STATIC);
    if (sqlite3_step(j->step_of) == SQLITE_ROW) {
        s.turn = sqlite3_column_int(j->step_of, 0);
        s.started_at = sqlite3_column_double(j->step_of, 1);
    }
    sqlite3_reset(j->step_of);
    sqlite3_clear_bindings(j->step_of);
    return s;
}

void pk_journal_keep_only(pk_journal *j, const char *const *keep, int n) {
    char *msg = NULL;
    int rc = sqlite3_exec(j->db,
                          "BEGIN; CREATE TEMP TABLE IF NOT EXISTS keep(id TEXT PRIMARY KEY);"
                          "DELETE FROM keep;",
                          NULL, NULL, &msg);
    sqlite3_stmt *ins = NULL;
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(j->db, "INSERT OR IGNORE INTO keep(id) VALUES(?)", -1, &ins, NULL);
    for (int i = 0; rc == SQLITE_OK && i < n; i++) {
        sqlite3_bind_text(ins, 1, keep[i], -1, SQLITE_STATIC);
        rc = sqlite3_step(ins) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
        sqlite3_reset(ins);
    }
    sqlite3_finalize(ins);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(j->db,
                          "DELETE FROM in_flight WHERE episode_id NOT IN (SELECT id FROM keep);"
                          "DELETE FROM closed WHERE episode_id NOT IN (SELECT id FROM keep);"
                          "COMMIT;",
                          NULL, NULL, &msg);
    if (rc != SQLITE_OK) {
        fprintf(stderr, "pkgym serve: server journal: pruning: %s\n",
                msg ? msg : sqlite3_errmsg(j->db));
        sqlite3_exec(j->db, "ROLLBACK", NULL, NULL, NULL);
    }
    sqlite3_free(msg);
}
