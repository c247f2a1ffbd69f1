/* The trajectory store: schema, WAL, errors, and a writer killed with SIGKILL mid-stream. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include "near.h"
#include "pk_reward.h"
#include "pk_store.h"

static char *db_path(void **state) {
    return (char *)*state;
}

static int setup(void **state) {
    char dir[] = "/tmp/pk-store-test-XXXXXX";
    if (!mkdtemp(dir))
        return -1;
    *state = pk_path_join(dir, "trajectories.db");
    return 0;
}

static int teardown(void **state) {
    char *path = *state;
    char *slash = strrchr(path, '/');
    *slash = '\0';
    pk_rm_rf(path);
    free(path);
    return 0;
}

/* Runs a one-value query on a separate raw connection. */
static char *query_text(const char *path, const char *sql) {
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    char *out = NULL;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
        out = strdup((const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    sqlite3_close(db);
    return out;
}

static void expect_query(const char *path, const char *sql, const char *want) {
    char *got = query_text(path, sql);
    assert_non_null(got);
    assert_string_equal(got, want);
    free(got);
}

static void write_and_read_back(void **state) {
    const char *path = db_path(state);
    pk_store *s = NULL;
    pk_error err = {0};
    assert_int_equal(pk_store_open(path, &s, &err), PK_OK);
    pk_episode_row e = {.episode_id = "ep1",
                        .problem_id = "allreduce",
                        .group = "g0",
                        .seed = 42,
                        .max_turns = 4,
                        .config_json = "{\"reward\":{\"gamma\":0.8}}",
                        .created_at = 1000.5,
                        .task_prompt = "Write an all-reduce."};
    assert_int_equal(pk_store_begin_episode(s, &e, &err), PK_OK);
    assert_int_equal(pk_store_begin_episode(s, &e, &err), PK_ERR_INVALID); /* duplicate id */
    pk_turn t = {.turn = 1,
                 .prompt = "Write an all-reduce.\n\nFormat: ```cuda ...```",
                 .action = "<think>..</think>```cu```",
                 .summary = "tiled",
                 .code = "__global__ void k() {}",
                 .status = PK_STATUS_CORRECT,
                 .score = 1.8,
                 .result_json = "{\"status\":\"correct\",\"speedup\":1.5,"
                                "\"candidate\":{\"median_us\":10},"
                                "\"reference\":{\"median_us\":15}}",
                 .feedback = "correct, 1.50x",
                 .started_at = 1001,
                 .finished_at = 1002};
    assert_int_equal(pk_store_add_turn(s, "ep1", &t, &err), PK_OK);
    assert_int_equal(pk_store_add_turn(s, "ep1", &t, &err), PK_ERR_INVALID); /* duplicate turn */
    t.turn = 5;
    t.status = PK_STATUS_COUNT;
    assert_int_equal(pk_store_add_turn(s, "ep1", &t, &err), PK_ERR_INVALID); /* no such status */
    t.status = PK_STATUS_INFRA_ERROR; /* ours, never a turn (#25) */
    assert_int_equal(pk_store_add_turn(s, "ep1", &t, &err), PK_ERR_INVALID);
    t.status = PK_STATUS_CORRECT;
    t.score = NAN;
    assert_int_equal(pk_store_add_turn(s, "ep1", &t, &err), PK_ERR_INVALID);
    t.score = 1.8;
    t.turn = 0; /* turns are numbered from 1 */
    assert_int_equal(pk_store_add_turn(s, "ep1", &t, &err), PK_ERR_INVALID);
    assert_non_null(strstr(err.message, "numbered from 1"));
    t.turn = 1;
    assert_int_equal(pk_store_add_turn(s, "nope", &t, &err), PK_ERR_INVALID); /* unknown episode */
    pk_turn fmt = {.turn = 2, .status = PK_STATUS_FORMAT_ERROR};
    assert_int_equal(pk_store_add_turn(s, "ep1", &fmt, &err), PK_OK);
    const double returns[2] = {1.8, 0.0};
    assert_int_equal(pk_store_finish_episode(s, "ep1", returns, 1, &err), PK_ERR_INVALID);
    assert_non_null(strstr(err.message, "2 stored turns"));
    assert_int_equal(pk_store_finish_episode(s, "ep1", returns, 2, &err), PK_OK);
    assert_int_equal(pk_store_finish_episode(s, "ep9", NULL, 0, &err), PK_ERR_NOT_FOUND);
    /* An episode without a config keeps an explicit snapshot of the defaults. */
    pk_episode_row e2 = {.episode_id = "ep2", .problem_id = "allgather", .max_turns = 1};
    assert_int_equal(pk_store_begin_episode(s, &e2, &err), PK_OK);
    pk_store_close(s);

    expect_query(path, "PRAGMA journal_mode", "wal");
    expect_query(path, "SELECT version FROM schema_version", "2");
    expect_query(path,
                 "SELECT group_id || ',' || seed || ',' || max_turns || ',' || task_prompt"
                 " FROM episodes WHERE id='ep1'",
                 "g0,42,4,Write an all-reduce.");
    expect_query(path, "SELECT returns_json FROM episodes WHERE id='ep1'", "[1.8,0.0]");
    expect_query(path, "SELECT finished_at > created_at FROM episodes WHERE id='ep1'", "1");
    expect_query(path,
                 "SELECT status || ',' || score || ',' || speedup || ',' || time_us || ',' ||"
                 " baseline_us || ',' || summary || ',' || feedback FROM turns WHERE turn=1",
                 "correct,1.8,1.5,10.0,15.0,tiled,correct, 1.50x");
    expect_query(path, "SELECT prompt FROM turns WHERE turn=1",
                 "Write an all-reduce.\n\nFormat: ```cuda ...```");
    expect_query(path,
                 "SELECT status || ',' || (result_json IS NULL) || ',' || (prompt IS NULL)"
                 " FROM turns WHERE turn=2",
                 "format_error,1,1");
    char *cfg = query_text(path, "SELECT config_json FROM episodes WHERE id='ep2'");
    pk_reward_config c, d;
    pk_reward_config_default(&d);
    assert_int_equal(pk_reward_config_from_stored_json(cfg, &c, &err), PK_OK);
    assert_memory_equal(&c, &d, sizeof c);
    free(cfg);

    /* Reopening keeps the data; read-only connections refuse writes. */
    assert_int_equal(pk_store_open(path, &s, &err), PK_OK);
    pk_store_close(s);
    assert_int_equal(pk_store_open_readonly(path, &s, &err), PK_OK);
    assert_int_equal(pk_store_begin_episode(s, &e2, &err), PK_ERR_INVALID);
    pk_store_close(s);
    expect_query(path, "SELECT count(*) FROM turns", "2");
}

/* pk_store_read_episode: one episode back, while the writer's connection stays open. */
static void read_episode_back(void **state) {
    const char *path = db_path(state);
    pk_store *w = NULL, *r = NULL;
    pk_error err = {0};
    assert_int_equal(pk_store_open(path, &w, &err), PK_OK);
    pk_episode_row e = {.episode_id = "ep1",
                        .problem_id = "selftest/scale",
                        .group = "g1",
                        .seed = 7,
                        .max_turns = 3,
                        .config_json = "{\"seed\":7}",
                        .created_at = 1000.25,
                        .task_prompt = "Scale it."};
    assert_int_equal(pk_store_begin_episode(w, &e, &err), PK_OK);
    assert_int_equal(pk_store_open_readonly(path, &r, &err), PK_OK);
    pk_store_set_busy_timeout(r, 200);
    pk_store_episode *got = NULL;
    assert_int_equal(pk_store_read_episode(r, "ep1", &got, &err), PK_OK);
    assert_non_null(got);
    assert_int_equal(got->n_turns, 0);
    assert_false(got->finished);
    assert_null(got->returns);
    pk_store_episode_free(got);

    pk_turn t0 = {.turn = 1,
                  .prompt = "Scale it.",
                  .action = "no code",
                  .summary = "plan",
                  .status = PK_STATUS_FORMAT_ERROR,
                  .score = -0.25,
                  .feedback = "no code block",
                  .started_at = 1001.5,
                  .finished_at = 1001.75};
    pk_turn t1 = {.turn = 2,
                  .prompt = "Scale it.\nEarlier: no code.",
                  .action = "```cuda\nx\n```",
                  .code = "x",
                  .status = PK_STATUS_CORRECT,
                  .score = 1.0 / 3.0,
                  .result_json = "{\"status\":\"correct\",\"speedup\":1.25}",
                  .feedback = "correct",
                  .started_at = 1002,
                  .finished_at = 1003.125};
    assert_int_equal(pk_store_add_turn(w, "ep1", &t1, &err), PK_OK); /* out of order on purpose */
    assert_int_equal(pk_store_add_turn(w, "ep1", &t0, &err), PK_OK);
    const double returns[2] = {-0.25 + 0.9 / 3.0, 1.0 / 3.0};
    assert_int_equal(pk_store_finish_episode(w, "ep1", returns, 2, &err), PK_OK);

    assert_int_equal(pk_store_read_episode(r, "ep1", &got, &err), PK_OK);
    assert_non_null(got);
    assert_string_equal(got->row.episode_id, "ep1");
    assert_string_equal(got->row.problem_id, "selftest/scale");
    assert_string_equal(got->row.group, "g1");
    assert_string_equal(got->row.config_json, "{\"seed\":7}");
    assert_string_equal(got->row.task_prompt, "Scale it.");
    assert_int_equal(got->row.seed, 7);
    assert_int_equal(got->row.max_turns, 3);
    assert_true(got->row.created_at == 1000.25);
    assert_true(got->finished && got->finished_at > 0);
    assert_int_equal(got->n_turns, 2);
    assert_true(got->returns[0] == returns[0] && got->returns[1] == returns[1]); /* exact */
    const pk_turn *a = &got->turns[0], *b = &got->turns[1];
    assert_int_equal(a->turn, 1);
    assert_int_equal(b->turn, 2);
    assert_string_equal(a->prompt, "Scale it.");
    assert_string_equal(b->prompt, "Scale it.\nEarlier: no code.");
    assert_string_equal(a->action, "no code");
    assert_string_equal(a->summary, "plan");
    assert_null(a->code);
    assert_null(a->result_json);
    assert_int_equal(a->status, PK_STATUS_FORMAT_ERROR);
    assert_true(a->score == -0.25 && a->started_at == 1001.5 && a->finished_at == 1001.75);
    assert_string_equal(b->code, "x");
    assert_null(b->summary);
    assert_string_equal(b->result_json, t1.result_json);
    assert_string_equal(b->feedback, "correct");
    assert_true(b->score == 1.0 / 3.0 && b->finished_at == 1003.125);
    assert_int_equal(b->status, PK_STATUS_CORRECT);
    pk_store_episode_free(got);

    /* Unknown ids: no episode, no error. */
    got = (pk_store_episode *)&err; /* overwritten */
    assert_int_equal(pk_store_read_episode(r, "ep9", &got, &err), PK_OK);
    assert_null(got);
    pk_store_episode_free(NULL);

    /* Returns that do not match the turns are an error, not a trajectory. */
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(
        sqlite3_exec(db, "UPDATE episodes SET returns_json='[1]' WHERE id='ep1'", NULL, NULL, NULL),
        SQLITE_OK);
    sqlite3_close(db);
    assert_int_equal(pk_store_read_episode(r, "ep1", &got, &err), PK_ERR_INVALID);
    assert_null(got);
    assert_non_null(strstr(err.message, "returns"));
    /* Each read ended its read transaction: a full checkpoint is not blocked by the reader. */
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA wal_checkpoint(TRUNCATE)", -1, &st, NULL),
                     SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_int_equal(sqlite3_column_int(st, 0), 0); /* 0: not blocked (busy) */
    sqlite3_finalize(st);
    sqlite3_close(db);
    pk_episode_row e2 = {.episode_id = "ep2", .problem_id = "p", .max_turns = 1};
    assert_int_equal(pk_store_begin_episode(w, &e2, &err), PK_OK);
    assert_int_equal(pk_store_read_episode(r, "ep2", &got, &err), PK_OK);
    assert_non_null(got);
    assert_null(got->row.group);
    pk_store_episode_free(got);
    pk_store_close(r);
    pk_store_close(w);
}

static void open_errors(void **state) {
    const char *path = db_path(state);
    pk_store *s = NULL;
    pk_error err = {0};
    assert_int_equal(pk_store_open_readonly(path, &s, &err), PK_ERR_NOT_FOUND);
    assert_null(s);
    assert_int_equal(pk_store_open("/proc/no/such/dir/x.db", &s, &err), PK_ERR_IO);
    /* A SQLite file that is not a pkgym store. */
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db, "CREATE TABLE t(x)", NULL, NULL, NULL), SQLITE_OK);
    sqlite3_close(db);
    assert_int_equal(pk_store_open_readonly(path, &s, &err), PK_ERR_INVALID);
    assert_non_null(strstr(err.message, "not a pkgym trajectory store"));
    /* A store from a future schema is refused, not misread. */
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_exec(db,
                                  "CREATE TABLE schema_version(version INTEGER NOT NULL);"
                                  "INSERT INTO schema_version VALUES(99)",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    sqlite3_close(db);
    assert_int_equal(pk_store_open(path, &s, &err), PK_ERR_UNSUPPORTED);
    assert_int_equal(pk_store_open_readonly(path, &s, &err), PK_ERR_UNSUPPORTED);
}

/* A store written by the first schema (version 1: 0-based turns, no prompt column), as an older
 * server left it. */
static void write_v1_store(const char *path) {
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    const char *sql =
        "CREATE TABLE schema_version(version INTEGER NOT NULL);"
        "INSERT INTO schema_version VALUES(1);"
        "CREATE TABLE episodes(id TEXT PRIMARY KEY, problem_id TEXT NOT NULL, group_id TEXT,"
        " seed INTEGER NOT NULL, max_turns INTEGER NOT NULL, config_json TEXT NOT NULL,"
        " task_prompt TEXT, created_at REAL NOT NULL, finished_at REAL, returns_json TEXT);"
        "CREATE TABLE turns(episode_id TEXT NOT NULL REFERENCES episodes(id),"
        " turn INTEGER NOT NULL, action TEXT, summary TEXT, code TEXT, status TEXT NOT NULL,"
        " score REAL NOT NULL, speedup REAL, time_us REAL, baseline_us REAL, result_json TEXT,"
        " feedback TEXT, started_at REAL, finished_at REAL, PRIMARY KEY(episode_id, turn));"
        "CREATE INDEX episodes_by_problem ON episodes(problem_id, group_id);"
        "INSERT INTO episodes VALUES('old', 'selftest/scale', 'g', -1, 3, '{\"reward\":{}}',"
        " 'Scale it.', 1000, 1010, '[0.5,1.0,0.25]');"
        "INSERT INTO turns VALUES('old', 0, 'a0', 's0', NULL, 'compile_error', 0, NULL, NULL,"
        " NULL, '{\"status\":\"compile_error\"}', 'f0', 1001, 1002);"
        "INSERT INTO turns VALUES('old', 1, 'a1', 's1', 'c1', 'correct', 1.0, 2.0, 5.0, 10.0,"
        " '{\"status\":\"correct\",\"speedup\":2.0}', 'f1', 1003, 1004);"
        "INSERT INTO turns VALUES('old', 2, 'a2', 's2', 'c2', 'incorrect', 0.25, NULL, NULL,"
        " NULL, '{\"status\":\"incorrect\"}', 'f2', 1005, 1006);";
    char *msg = NULL;
    if (sqlite3_exec(db, sql, NULL, NULL, &msg) != SQLITE_OK)
        fail_msg("v1 store: %s", msg);
    sqlite3_close(db);
}

static void expect_old_episode(pk_store *s, int with_prompts_null) {
    pk_store_episode *got = NULL;
    pk_error err = {0};
    assert_int_equal(pk_store_read_episode(s, "old", &got, &err), PK_OK);
    assert_non_null(got);
    assert_int_equal(got->n_turns, 3);
    for (int i = 0; i < 3; i++) {
        char want[8];
        assert_int_equal(got->turns[i].turn, i + 1); /* 1-based, as everywhere */
        snprintf(want, sizeof want, "a%d", i);
        assert_string_equal(got->turns[i].action, want);
        snprintf(want, sizeof want, "f%d", i);
        assert_string_equal(got->turns[i].feedback, want);
        if (with_prompts_null)
            assert_null(got->turns[i].prompt);
    }
    assert_true(got->finished && got->returns[1] == 1.0 && got->returns[2] == 0.25);
    assert_int_equal(got->row.seed, -1);
    pk_store_episode_free(got);
}

/* A version-1 store still opens: read-only as if migrated (nothing written), and for writing
 * migrated in place (turns 1-based, a prompt column), with nothing lost. */
static void migrates_version_1(void **state) {
    const char *path = db_path(state);
    write_v1_store(path);
    pk_store *s = NULL;
    pk_error err = {0};
    assert_int_equal(pk_store_open_readonly(path, &s, &err), PK_OK);
    expect_old_episode(s, 1);
    pk_store_close(s);
    expect_query(path, "SELECT version FROM schema_version", "1"); /* untouched */
    expect_query(path, "SELECT group_concat(turn) FROM turns", "0,1,2");

    assert_int_equal(pk_store_open(path, &s, &err), PK_OK);
    expect_query(path, "SELECT version FROM schema_version", "2");
    expect_query(
        path, "SELECT group_concat(turn || ':' || action) FROM (SELECT * FROM turns ORDER BY turn)",
        "1:a0,2:a1,3:a2");
    expect_query(path,
                 "SELECT speedup || ',' || time_us || ',' || baseline_us || ',' || score"
                 " FROM turns WHERE turn=2",
                 "2.0,5.0,10.0,1.0");
    expect_query(path, "SELECT count(*) FROM turns WHERE prompt IS NULL", "3");
    expect_query(path, "PRAGMA integrity_check", "ok");
    expect_old_episode(s, 1);
    /* The migrated store takes new turns with prompts. */
    pk_episode_row e = {.episode_id = "new", .problem_id = "p", .seed = 3, .max_turns = 1};
    assert_int_equal(pk_store_begin_episode(s, &e, &err), PK_OK);
    pk_turn t = {.turn = 1, .prompt = "P", .status = PK_STATUS_INCORRECT};
    assert_int_equal(pk_store_add_turn(s, "new", &t, &err), PK_OK);
    pk_store_close(s);
    expect_query(path, "SELECT prompt FROM turns WHERE episode_id='new'", "P");
    /* Opening again does not migrate twice. */
    assert_int_equal(pk_store_open(path, &s, &err), PK_OK);
    pk_store_close(s);
    expect_query(path, "SELECT group_concat(turn) FROM turns WHERE episode_id='old'", "1,2,3");
}

enum { KILL_AFTER = 20, CHILD_TURNS = 100000 };

/* The child writes turns forever and acknowledges each committed one on the pipe. */
static void child_writer(const char *path, int ack_fd) {
    pk_store *s = NULL;
    if (pk_store_open(path, &s, NULL))
        _exit(3);
    pk_episode_row e = {.episode_id = "killed", .problem_id = "p", .max_turns = CHILD_TURNS};
    if (pk_store_begin_episode(s, &e, NULL))
        _exit(4);
    char code[64];
    for (int i = 0; i < CHILD_TURNS; i++) {
        snprintf(code, sizeof code, "kernel %d", i);
        pk_turn t = {.turn = i + 1, .code = code, .status = PK_STATUS_INCORRECT, .score = 0.5 * i};
        if (pk_store_add_turn(s, "killed", &t, NULL))
            _exit(5);
        if (write(ack_fd, &i, sizeof i) != (ssize_t)sizeof i)
            _exit(6);
    }
    _exit(7); /* never reached in time: the parent kills us first */
}

static void kill9_loses_only_steps_in_flight(void **state) {
    const char *path = db_path(state);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        child_writer(path, fds[1]);
    }
    close(fds[1]);
    int acked = -1, i;
    while (acked < KILL_AFTER - 1 && read(fds[0], &i, sizeof i) == (ssize_t)sizeof i)
        acked = i;
    assert_int_equal(acked, KILL_AFTER - 1);
    assert_int_equal(kill(pid, SIGKILL), 0);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    /* Acknowledgements the child sent before dying are committed turns too. */
    while (read(fds[0], &i, sizeof i) == (ssize_t)sizeof i)
        acked = i;
    close(fds[0]);

    expect_query(path, "PRAGMA integrity_check", "ok");
    char *n_text = query_text(path, "SELECT count(*) FROM turns WHERE episode_id='killed'");
    int n = atoi(n_text);
    free(n_text);
    assert_true(n >= acked + 1);
    assert_true(n <= acked + 2); /* at most the one step in flight got past its commit */
    /* Every stored turn is complete and contiguous. */
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM turns WHERE episode_id='killed' AND turn <= %d AND"
             " code = 'kernel ' || (turn - 1) AND score = 0.5 * (turn - 1) AND"
             " status = 'incorrect'",
             n);
    char *ok = query_text(path, sql);
    assert_int_equal(atoi(ok), n);
    free(ok);
    /* The killed writer's store opens for writing again and takes more turns. */
    pk_store *s = NULL;
    pk_error err = {0};
    assert_int_equal(pk_store_open(path, &s, &err), PK_OK);
    pk_turn t = {.turn = n + 1, .status = PK_STATUS_CORRECT};
    assert_int_equal(pk_store_add_turn(s, "killed", &t, &err), PK_OK);
    pk_store_close(s);
}

enum { WRITERS = 4, WRITER_TURNS = 25 };

typedef struct writer_arg {
    const char *path;
    int index;
    int rc;
} writer_arg;

/* One connection per thread, as the server does; the busy timeout serializes the commits. */
/* pk_store_put_turns never leaves a gap (issue 27, finding 5): a turn after a missing one is
 * refused with nothing written; turns sent again are replaced; later rows are dropped. */
static void put_turns_keeps_turns_contiguous(void **state) {
    pk_store *s = NULL;
    pk_error err;
    assert_int_equal(pk_store_open(db_path(state), &s, &err), PK_OK);
    pk_episode_row e = {.episode_id = "ep", .problem_id = "p", .seed = 1, .max_turns = 8};
    assert_int_equal(pk_store_begin_episode(s, &e, &err), PK_OK);
    pk_turn t[4];
    for (int i = 0; i < 4; i++)
        t[i] = (pk_turn){
            .turn = i + 1, .action = i == 1 ? "second" : "other", .status = PK_STATUS_FORMAT_ERROR};
    assert_int_equal(pk_store_put_turns(s, "ep", &t[0], 1, &err), PK_OK);
    assert_int_equal(pk_store_put_turns(s, "ep", &t[2], 1, &err), PK_ERR_INVALID); /* 2 missing */
    assert_non_null(strstr(err.message, "gap"));
    expect_query(db_path(state), "SELECT group_concat(turn) FROM turns", "1");
    assert_int_equal(pk_store_put_turns(s, "ep", &t[1], 3, &err), PK_OK); /* 2..4 at once */
    expect_query(db_path(state), "SELECT group_concat(turn) FROM turns", "1,2,3,4");
    t[1].action = "second, again";
    assert_int_equal(pk_store_put_turns(s, "ep", &t[1], 1, &err), PK_OK);
    expect_query(db_path(state), "SELECT group_concat(turn) FROM turns", "1,2");
    expect_query(db_path(state), "SELECT action FROM turns WHERE turn = 2", "second, again");
    pk_turn other = {.turn = 5, .status = PK_STATUS_FORMAT_ERROR};
    pk_turn pair[2] = {t[2], other}; /* not consecutive */
    assert_int_equal(pk_store_put_turns(s, "ep", pair, 2, &err), PK_ERR_INVALID);
    pk_store_close(s);
}

static void *writer_thread(void *p) {
    writer_arg *w = p;
    pk_store *s = NULL;
    char id[32];
    snprintf(id, sizeof id, "w%d", w->index);
    w->rc = pk_store_open(w->path, &s, NULL);
    pk_episode_row e = {.episode_id = id, .problem_id = "p", .max_turns = WRITER_TURNS};
    if (!w->rc)
        w->rc = pk_store_begin_episode(s, &e, NULL);
    for (int i = 0; !w->rc && i < WRITER_TURNS; i++) {
        pk_turn t = {.turn = i + 1, .status = PK_STATUS_INCORRECT};
        w->rc = pk_store_add_turn(s, id, &t, NULL);
    }
    pk_store_close(s);
    return NULL;
}

static void concurrent_writers(void **state) {
    pthread_t th[WRITERS];
    writer_arg args[WRITERS];
    for (int i = 0; i < WRITERS; i++) {
        args[i] = (writer_arg){.path = db_path(state), .index = i, .rc = -1};
        assert_int_equal(pthread_create(&th[i], NULL, writer_thread, &args[i]), 0);
    }
    for (int i = 0; i < WRITERS; i++) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
        assert_int_equal(args[i].rc, PK_OK);
    }
    char want[16];
    snprintf(want, sizeof want, "%d", WRITERS * WRITER_TURNS);
    expect_query(db_path(state), "SELECT count(*) FROM turns", want);
    expect_query(db_path(state), "PRAGMA integrity_check", "ok");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(write_and_read_back, setup, teardown),
        cmocka_unit_test_setup_teardown(read_episode_back, setup, teardown),
        cmocka_unit_test_setup_teardown(open_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(migrates_version_1, setup, teardown),
        cmocka_unit_test_setup_teardown(kill9_loses_only_steps_in_flight, setup, teardown),
        cmocka_unit_test_setup_teardown(concurrent_writers, setup, teardown),
        cmocka_unit_test_setup_teardown(put_turns_keeps_turns_contiguous, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
