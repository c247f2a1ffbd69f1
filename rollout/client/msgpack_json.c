/* The wire encoding: jansson values <-> msgpack. */
#include "pk_client.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* msgpack-c gives a NULL pointer for an empty string; the C library's mem* functions and
 * jansson want a real one. */
static const char *str_bytes(const msgpack_object_str *s) {
    return s->size ? s->ptr : "";
}

int pk_msgpack_pack_json(msgpack_packer *pk, const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        if (msgpack_pack_map(pk, json_object_size(v)))
            return -1;
        const char *key;
        json_t *val;
        json_object_foreach((json_t *)v, key, val) {
            size_t n = strlen(key);
            if (msgpack_pack_str(pk, n) || msgpack_pack_str_body(pk, key, n) ||
                pk_msgpack_pack_json(pk, val))
                return -1;
        }
        return 0;
    }
    case JSON_ARRAY: {
        if (msgpack_pack_array(pk, json_array_size(v)))
            return -1;
        size_t i;
        json_t *val;
        json_array_foreach(v, i, val) {
            if (pk_msgpack_pack_json(pk, val))
                return -1;
        }
        return 0;
    }
    case JSON_STRING: {
        size_t n = json_string_length(v);
        return msgpack_pack_str(pk, n) || msgpack_pack_str_body(pk, json_string_value(v), n);
    }
    case JSON_INTEGER:
        return msgpack_pack_int64(pk, json_integer_value(v));
    case JSON_REAL:
        return msgpack_pack_double(pk, json_real_value(v));
    case JSON_TRUE:
        return msgpack_pack_true(pk);
    case JSON_FALSE:
        return msgpack_pack_false(pk);
    case JSON_NULL:
        return msgpack_pack_nil(pk);
    }
    return -1;
}

/* path: the dotted name of o, for error messages. */
static int convert(const msgpack_object *o, pk_strbuf *path, int depth, int max_depth, json_t **out,
                   pk_error *err) {
    *out = NULL;
    if (depth > max_depth)
        return pk_error_set(err, PK_ERR_INVALID, "%s: nested deeper than %d levels", path->data,
                            max_depth);
    switch (o->type) {
    case MSGPACK_OBJECT_NIL:
        *out = json_null();
        break;
    case MSGPACK_OBJECT_BOOLEAN:
        *out = json_boolean(o->via.boolean);
        break;
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
        if (o->via.u64 > (uint64_t)INT64_MAX)
            return pk_error_set(err, PK_ERR_INVALID, "%s: integer too large", path->data);
        *out = json_integer((json_int_t)o->via.u64);
        break;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER:
        *out = json_integer((json_int_t)o->via.i64);
        break;
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64:
        if (!isfinite(o->via.f64))
            return pk_error_set(err, PK_ERR_INVALID, "%s: not a finite number", path->data);
        *out = json_real(o->via.f64);
        break;
    case MSGPACK_OBJECT_STR:
        *out = json_stringn(str_bytes(&o->via.str), o->via.str.size);
        if (!*out)
            return pk_error_set(err, PK_ERR_INVALID, "%s: string is not valid UTF-8", path->data);
        break;
    case MSGPACK_OBJECT_ARRAY: {
        json_t *a = json_array();
        size_t base = path->len;
        for (uint32_t i = 0; a && i < o->via.array.size; i++) {
            json_t *item;
            path->len = base;
            pk_strbuf_printf(path, "[%u]", i);
            int rc = convert(&o->via.array.ptr[i], path, depth + 1, max_depth, &item, err);
            if (rc) {
                json_decref(a);
                return rc;
            }
            json_array_append_new(a, item);
        }
        if (path->data)
            path->data[path->len = base] = '\0';
        *out = a;
        break;
    }
    case MSGPACK_OBJECT_MAP: {
        json_t *m = json_object();
        size_t base = path->len;
        for (uint32_t i = 0; m && i < o->via.map.size; i++) {
            const msgpack_object_kv *kv = &o->via.map.ptr[i];
            if (kv->key.type != MSGPACK_OBJECT_STR) {
                json_decref(m);
                return pk_error_set(err, PK_ERR_INVALID, "%s: map key is not a string", path->data);
            }
            path->len = base;
            pk_strbuf_printf(path, ".%.*s", (int)kv->key.via.str.size, str_bytes(&kv->key.via.str));
            json_t *val;
            int rc = convert(&kv->val, path, depth + 1, max_depth, &val, err);
            if (rc) {
                json_decref(m);
                return rc;
            }
            /* Keys with NUL bytes cannot be JSON object keys; setn checks UTF-8 (and takes
             * val even when it fails). */
            const char *key = str_bytes(&kv->key.via.str);
            int bad_key = memchr(key, '\0', kv->key.via.str.size) != NULL;
            if (bad_key)
                json_decref(val);
            if (bad_key || json_object_setn_new(m, key, kv->key.via.str.size, val)) {
                json_decref(m);
                return pk_error_set(err, PK_ERR_INVALID, "%s: invalid map key", path->data);
            }
        }
        if (path->data)
            path->data[path->len = base] = '\0';
        *out = m;
        break;
    }
    case MSGPACK_OBJECT_BIN:
    case MSGPACK_OBJECT_EXT:
    default:
        return pk_error_set(err, PK_ERR_INVALID, "%s: binary or extension data is not accepted",
                            path->data);
    }
    if (!*out)
        return pk_error_set(err, PK_ERR_NOMEM, "%s: out of memory", path->data);
    return PK_OK;
}

int pk_json_from_msgpack(const msgpack_object *o, const char *where, int max_depth, json_t **out,
                         pk_error *err) {
    pk_strbuf path = {0};
    if (pk_strbuf_puts(&path, where ? where : "value"))
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    int rc = convert(o, &path, 0, max_depth, out, err);
    pk_strbuf_free(&path);
    return rc;
}
