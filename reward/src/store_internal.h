/* Private to reward/: the store's connection, shared by the writer and the trajectory reader. */
#ifndef PK_STORE_INTERNAL_H
#define PK_STORE_INTERNAL_H

#include <sqlite3.h>

#include "pk_store.h"

/* 1: the first schema (turns 0-based). 2: turns 1-based, turns.prompt. */
#define PK_STORE_SCHEMA_VERSION 2

struct pk_store {
    sqlite3 *db;
    int readonly;
    int version; /* of the file: PK_STORE_SCHEMA_VERSION, or 1 opened read-only */
    sqlite3_stmt *insert_episode;
    sqlite3_stmt *insert_turn;
    sqlite3_stmt *count_turns;
    sqlite3_stmt *finish_episode;
    sqlite3_stmt *replace_turn; /* pk_store_put_turns */
    sqlite3_stmt *count_before; /* stored turns numbered below one */
    sqlite3_stmt *delete_after; /* stored turns numbered above one */
};

#endif
