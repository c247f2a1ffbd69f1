/* pk_compile_cache: compiled candidate objects on disk, keyed by the harness's compile key
 * (SHA-256 of source, flags, toolchain and harness versions: pk_job_compile_key), so a
 * change of any of those is a different key, i.e. a miss. Safe across threads and
 * processes: entries are written to a temporary name and renamed into place. */
#ifndef PK_COMPILE_CACHE_H
#define PK_COMPILE_CACHE_H

#include "pk_common.h"

typedef struct pk_compile_cache pk_compile_cache;

/* Uses <root>/compile (created). */
int pk_compile_cache_open(const char *root, pk_compile_cache **out, pk_error *err);
void pk_compile_cache_close(pk_compile_cache *c);
/* The cached object's path (malloc'd) or NULL on a miss; a key that is not 64 lowercase hex
 * digits is always a miss. */
char *pk_compile_cache_lookup(pk_compile_cache *c, const char *key);
/* Copies object_path into the cache under key. */
int pk_compile_cache_store(pk_compile_cache *c, const char *key, const char *object_path,
                           pk_error *err);

#endif
