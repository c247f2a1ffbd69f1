/* Small msgpack helpers for the remote-worker wire codecs: keyed packing and typed, checked
 * reads of map fields. A read never trusts the peer: a wrong type is an error, not a crash. */
#ifndef PK_MP_H
#define PK_MP_H

#include <stddef.h>
#include <stdint.h>

#include <msgpack.h>

/* Packing: each returns non-zero when the buffer could not grow. */
int pk_mp_key(msgpack_packer *pk, const char *key);
int pk_mp_str(msgpack_packer *pk, const char *s); /* NULL packs nil */
int pk_mp_kv_str(msgpack_packer *pk, const char *key, const char *v);
int pk_mp_kv_int(msgpack_packer *pk, const char *key, int64_t v);
int pk_mp_kv_uint(msgpack_packer *pk, const char *key, uint64_t v);
int pk_mp_kv_double(msgpack_packer *pk, const char *key, double v);
int pk_mp_kv_bool(msgpack_packer *pk, const char *key, int v);

/* Reading. get: the value of key in map (NULL when absent, nil, or map is not a map). */
const msgpack_object *pk_mp_get(const msgpack_object *map, const char *key);
/* Each returns 0 when the key is absent (out untouched) or read, -1 on a wrong type/range. */
int pk_mp_get_i64(const msgpack_object *map, const char *key, int64_t *out);
int pk_mp_get_int(const msgpack_object *map, const char *key, int *out);
int pk_mp_get_u64(const msgpack_object *map, const char *key, uint64_t *out);
int pk_mp_get_double(const msgpack_object *map, const char *key, double *out);
int pk_mp_get_bool(const msgpack_object *map, const char *key, int *out);
/* Copies a string into buf (truncated to cap - 1 bytes). */
int pk_mp_get_buf(const msgpack_object *map, const char *key, char *buf, size_t cap);
/* A malloc'd copy of a string field (NUL bytes refused); *out stays NULL when absent. */
int pk_mp_get_dup(const msgpack_object *map, const char *key, char **out);
/* 1 when the string object equals s. */
int pk_mp_str_eq(const msgpack_object *o, const char *s);

#endif
