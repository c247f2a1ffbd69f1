/* Trajectory-store write latency: turns with realistic payloads (8 KiB response, 4 KiB code,
 * 3 KiB result JSON), one committed transaction each, as the server writes them.
 * usage: bench_store DIR [TURNS]  -> one JSON line of figures on stdout. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "pk_common.h"
#include "pk_store.h"

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static char *filled(size_t n, char c) {
    char *s = malloc(n + 1);
    if (s) {
        memset(s, c, n);
        s[n] = '\0';
    }
    return s;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_store DIR [TURNS]\n");
        return 2;
    }
    int turns = argc > 2 ? atoi(argv[2]) : 200;
    if (turns < 1) {
        fprintf(stderr, "bench_store: bad TURNS\n");
        return 2;
    }
    char *path = pk_path_join(argv[1], "bench-trajectories.db");
    char *action = filled(8192, 'a'), *code = filled(4096, 'c');
    char *result = malloc(3200);
    double *lat = malloc(sizeof *lat * (size_t)turns);
    if (!path || !action || !code || !result || !lat)
        return 1;
    snprintf(result, 3200, "{\"status\":\"correct\",\"speedup\":1.25,\"reason\":\"%3000s\"}", "");
    pk_rm_rf(path);
    pk_error err = {0};
    pk_store *s = NULL;
    if (pk_store_open(path, &s, &err) != PK_OK) {
        fprintf(stderr, "bench_store: %s\n", err.message);
        return 1;
    }
    pk_episode_row e = {.episode_id = "bench", .problem_id = "p", .max_turns = turns};
    if (pk_store_begin_episode(s, &e, &err) != PK_OK) {
        fprintf(stderr, "bench_store: %s\n", err.message);
        return 1;
    }
    for (int i = 0; i < turns; i++) {
        pk_turn t = {.turn = i + 1,
                     .action = action,
                     .code = code,
                     .summary = "plan",
                     .status = PK_STATUS_CORRECT,
                     .score = 1.55,
                     .result_json = result,
                     .feedback = "correct, 1.25x"};
        double t0 = pk_now_ms();
        if (pk_store_add_turn(s, "bench", &t, &err) != PK_OK) {
            fprintf(stderr, "bench_store: %s\n", err.message);
            return 1;
        }
        lat[i] = pk_now_ms() - t0;
    }
    pk_store_close(s);
    /* The figures only count if every turn really landed. */
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    int stored = -1;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db, "SELECT count(*) FROM turns", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW)
        stored = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    if (stored != turns) {
        fprintf(stderr, "bench_store: %d of %d turns stored\n", stored, turns);
        return 1;
    }
    qsort(lat, (size_t)turns, sizeof *lat, cmp);
    printf("{\"turns\":%d,\"synchronous\":\"full\",\"median_ms\":%.3f,\"p99_ms\":%.3f,"
           "\"max_ms\":%.3f}\n",
           turns, lat[turns / 2], lat[(int)(turns * 0.99)], lat[turns - 1]);
    pk_rm_rf(path);
    free(path);
    free(action);
    free(code);
    free(result);
    free(lat);
    return 0;
}
