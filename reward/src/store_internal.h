/* Private to reward/: the store's connection, shared by the writer and the trajectory reader. */
#ifndef PK_STORE_INTERNAL_H
#define PK_STORE_INTERNAL_H

#include <sqlite3.h>

#include "pk_store.h"

#define PK_STORE_SCHEMA_VERSION 1

struct pk_store {
    sqlite3 *db;
    int readonly;
    sqlite3_stmt *insert_episode;
    sqlite3_stmt *insert_turn;
    sqlite3_stmt *count_turns;
    sqlite3_stmt *finish_episode;
};

#endif
