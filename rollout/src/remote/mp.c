/* msgpack helpers (pk_mp.h). */
#include "pk_mp.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

int pk_mp_key(msgpack_packer *pk, const char *key) {
    size_t n = strlen(key);
    return msgpack_pack_str(pk, n) || msgpack_pack_str_body(pk, key, n);
}

int pk_mp_str(msgpack_packer *pk, const char *s) {
    if (!s)
        return msgpack_pack_nil(pk);
    return pk_mp_key(pk, s);
}

int pk_mp_kv_str(msgpack_packer *pk, const char *key, const char *v) {
    return pk_mp_key(pk, key) || pk_mp_str(pk, v);
}

int pk_mp_kv_int(msgpack_packer *pk, const char *key, int64_t v) {
    return pk_mp_key(pk, key) || msgpack_pack_int64(pk, v);
}

int pk_mp_kv_uint(msgpack_packer *pk, const char *key, uint64_t v) {
    return pk_mp_key(pk, key) || msgpack_pack_uint64(pk, v);
}

int pk_mp_kv_double(msgpack_packer *pk, const char *key, double v) {
    return pk_mp_key(pk, key) || msgpack_pack_double(pk, v);
}

int pk_mp_kv_bool(msgpack_packer *pk, const char *key, int v) {
    return pk_mp_key(pk, key) || (v ? msgpack_pack_true(pk) : msgpack_pack_false(pk));
}

int pk_mp_str_eq(const msgpack_object *o, const char *s) {
    size_t n = strlen(s);
    return o && o->type == MSGPACK_OBJECT_STR && o->via.str.size == n &&
           (n == 0 || memcmp(o->via.str.ptr, s, n) == 0);
}

const msgpack_object *pk_mp_get(const msgpack_object *map, const char *key) {
    if (!map || map->type != MSGPACK_OBJECT_MAP)
        return NULL;
    for (uint32_t i = 0; i < map->via.map.size; i++) {
        const msgpack_object_kv *kv = &map->via.map.ptr[i];
        if (pk_mp_str_eq(&kv->key, key))
            return kv->val.type == MSGPACK_OBJECT_NIL ? NULL : &kv->val;
    }
    return NULL;
}

int pk_mp_get_i64(const msgpack_object *map, const char *key, int64_t *out) {
    const msgpack_object *o = pk_mp_get(map, key);
    if (!o)
        return 0;
    if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
        *out = o->via.i64;
        return 0;
    }
    if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 <= (uint64_t)INT64_MAX) {
        *out = (int64_t)o->via.u64;
        return 0;
    }
    return -1;
}

int pk_mp_get_int(const msgpack_object *map, const char *key, int *out) {
    int64_t v = *out;
    if (pk_mp_get_i64(map, key, &v) || v < INT_MIN || v > INT_MAX)
        return -1;
    *out = (int)v;
    return 0;
}

int pk_mp_get_u64(const msgpack_object *map, const char *key, uint64_t *out) {
    const msgpack_object *o = pk_mp_get(map, key);
    if (!o)
        return 0;
    if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
        return -1;
    *out = o->via.u64;
    return 0;
}

int pk_mp_get_double(const msgpack_object *map, const char *key, double *out) {
    const msgpack_object *o = pk_mp_get(map, key);
    if (!o)
        return 0;
    switch (o->type) {
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64:
        *out = o->via.f64;
        return 0;
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
        *out = (double)o->via.u64;
        return 0;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER:
        *out = (double)o->via.i64;
        return 0;
    default:
        return -1;
    }
}

int pk_mp_get_bool(const msgpack_object *map, const char *key, int *out) {
    const msgpack_object *o = pk_mp_get(map, key);
    if (!o)
        return 0;
    if (o->type != MSGPACK_OBJECT_BOOLEAN)
        return -1;
    *out = o->via.boolean ? 1 : 0;
    return 0;
}

int pk_mp_get_buf(const msgpack_object *map, const char *key, char *buf, size_t cap) {
    const msgpack_object *o = pk_mp_get(map, key);
    if (!o)
        return 0;
    if (o->type != MSGPACK_OBJECT_STR || cap == 0)
        return -1;
    size_t n = o->via.str.size < cap - 1 ? o->via.str.size : cap - 1;
    if (n)
        memcpy(buf, o->via.str.ptr, n);
    buf[n] = '\0';
    return 0;
}

int pk_mp_get_dup(const msgpack_object *map, const char *key, char **out) {
    const msgpack_object *o = pk_mp_get(map, key);
    if (!o)
        return 0;
    if (o->type != MSGPACK_OBJECT_STR)
        return -1;
    size_t n = o->via.str.size;
    /* msgpack-c gives a NULL pointer for an empty string. */
    if (n && memchr(o->via.str.ptr, '\0', n))
        return -1;
    char *s = malloc(n + 1);
    if (!s)
        return -1;
    if (n)
        memcpy(s, o->via.str.ptr, n);
    s[n] = '\0';
    *out = s;
    return 0;
}
