/* Compile cache on disk: <root>/compile/<key[0:2]>/<key>.so. The objects are model-written
 * code: directories 0700 and files 0600, so that no other local user reads or swaps them. */
#include "pk_compile_cache.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static atomic_uint tmp_seq; /* unique temporary names across threads */

struct pk_compile_cache {
    char *dir;
};

int pk_compile_cache_open(const char *root, pk_compile_cache **out, pk_error *err) {
    *out = NULL;
    pk_compile_cache *c = calloc(1, sizeof *c);
    if (!c || !(c->dir = pk_path_join(root, "compile"))) {
        free(c);
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    }
    int rc = pk_mkdir_private(root, NULL, err);
    if (!rc)
        rc = pk_mkdir_private(c->dir, NULL, err);
    if (rc) {
        pk_compile_cache_close(c);
        return rc;
    }
    *out = c;
    return PK_OK;
}

void pk_compile_cache_close(pk_compile_cache *c) {
    if (!c)
        return;
    free(c->dir);
    free(c);
}

static int valid_key(const char *key) {
    if (!key || strlen(key) != 64)
        return 0;
    for (const char *p = key; *p; p++)
        if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
            return 0;
    return 1;
}

static char *entry_path(pk_compile_cache *c, const char *key) {
    size_t n = strlen(c->dir) + 80;
    char *path = malloc(n);
    if (path)
        snprintf(path, n, "%s/%.2s/%s.so", c->dir, key, key);
    return path;
}

char *pk_compile_cache_lookup(pk_compile_cache *c, const char *key) {
    if (!c || !valid_key(key))
        return NULL;
    char *path = entry_path(c, key);
    if (path && !pk_path_exists(path)) {
        free(path);
        return NULL;
    }
    return path;
}

int pk_compile_cache_store(pk_compile_cache *c, const char *key, const char *object_path,
                           pk_error *err) {
    if (!valid_key(key))
        return pk_error_set(err, PK_ERR_INVALID, "compile key is not a SHA-256 hex digest");
    char *data = NULL;
    size_t len = 0;
    int rc = pk_read_file_untrusted(object_path, 0, &data, &len, err); /* a job's file */
    if (rc)
        return rc;
    char *path = entry_path(c, key);
    size_t tn = path ? strlen(path) + 64 : 0;
    char *tmp = path ? malloc(tn) : NULL;
    if (!tmp) {
        free(path);
        free(data);
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    }
    char sub[4096];
    snprintf(sub, sizeof sub, "%s/%.2s", c->dir, key);
    snprintf(tmp, tn, "%s.tmp.%ld.%u", path, (long)getpid(), atomic_fetch_add(&tmp_seq, 1));
    rc = pk_mkdir_private(sub, NULL, err);
    if (!rc)
        rc = pk_write_file_private(tmp, data, len, err);
    if (!rc && rename(tmp, path) != 0)
        rc = pk_error_errno(err, PK_ERR_IO, "rename %s", path);
    if (rc)
        unlink(tmp);
    free(tmp);
    free(path);
    free(data);
    return rc;
}
