/* Protocol v1 request decoding: one msgpack map with a string `op`, optional `id`. */
#include "pk_protocol.h"

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

/* msgpack-c gives a NULL pointer for an empty string; the C library's mem* functions and
 * jansson want a real one. */
static const char *str_bytes(const msgpack_object_str *s) {
    return s->size ? s->ptr : "";
}

int pk_request_decode(pk_request *r, const void *data, size_t len, size_t max_bytes,
                      pk_error *err) {
    memset(r, 0, sizeof *r);
    msgpack_unpacked_init(&r->unpacked);
    if (len > max_bytes)
        return pk_error_set(err, PK_ERR_INVALID,
                            "request is %zu bytes; the limit is %zu (limits.max_request_bytes)",
                            len, max_bytes);
    int rc = pk_msgpack_check(data, len, PK_MAX_NESTING, err);
    if (rc)
        return rc;
    size_t off = 0;
    if (msgpack_unpack_next(&r->unpacked, data, len, &off) != MSGPACK_UNPACK_SUCCESS)
        return pk_error_set(err, PK_ERR_INVALID, "not msgpack");
    const msgpack_object *root = &r->unpacked.data;
    if (root->type != MSGPACK_OBJECT_MAP)
        return pk_error_set(err, PK_ERR_INVALID, "request is not a msgpack map");
    r->has_map = 1;
    r->id = pk_request_field(r, "id");
    const msgpack_object *op = pk_request_field(r, "op");
    if (!op)
        return pk_error_set(err, PK_ERR_INVALID, "field 'op' is required");
    if (op->type != MSGPACK_OBJECT_STR)
        return pk_error_set(err, PK_ERR_INVALID, "field 'op' must be a string");
    if (op->via.str.size == 0 || op->via.str.size >= sizeof r->op ||
        memchr(op->via.str.ptr, '\0', op->via.str.size)) {
        return pk_error_set(err, PK_ERR_INVALID, "field 'op' is not an operation name");
    }
    /* Replies quote it (unknown_op): invalid UTF-8 would make the reply unencodable
     * (issue 27, finding 8: it was answered `internal: out of memory`). */
    json_t *check = json_stringn(op->via.str.ptr, op->via.str.size);
    if (!check)
        return pk_error_set(err, PK_ERR_INVALID, "field 'op' is not valid UTF-8");
    json_decref(check);
    memcpy(r->op, op->via.str.ptr, op->via.str.size);
    r->op[op->via.str.size] = '\0';
    return PK_OK;
}

void pk_request_free(pk_request *r) {
    msgpack_unpacked_destroy(&r->unpacked);
}

const msgpack_object *pk_request_field(const pk_request *r, const char *name) {
    if (!r->has_map)
        return NULL;
    const msgpack_object_map *m = &r->unpacked.data.via.map;
    size_t n = strlen(name);
    for (uint32_t i = 0; i < m->size; i++) {
        const msgpack_object *k = &m->ptr[i].key;
        if (k->type == MSGPACK_OBJECT_STR && k->via.str.size == n &&
            memcmp(str_bytes(&k->via.str), name, n) == 0)
            return &m->ptr[i].val;
    }
    return NULL;
}

int pk_request_str(const pk_request *r, const char *name, int required, size_t max_len, char **out,
                   pk_error *err) {
    *out = NULL;
    const msgpack_object *o = pk_request_field(r, name);
    if (!o || o->type == MSGPACK_OBJECT_NIL) {
        if (required)
            return pk_error_set(err, PK_ERR_INVALID, "field '%s' is required", name);
        return PK_OK;
    }
    if (o->type != MSGPACK_OBJECT_STR)
        return pk_error_set(err, PK_ERR_INVALID, "field '%s' must be a string", name);
    if (o->via.str.size > max_len)
        return pk_error_set(err, PK_ERR_INVALID, "field '%s' is %u bytes; the limit is %zu", name,
                            o->via.str.size, max_len);
    const char *bytes = str_bytes(&o->via.str);
    if (memchr(bytes, '\0', o->via.str.size))
        return pk_error_set(err, PK_ERR_INVALID, "field '%s' contains a NUL byte", name);
    /* Text goes into prompts, JSON and replies: it must be valid UTF-8. */
    json_t *check = json_stringn(bytes, o->via.str.size);
    if (!check)
        return pk_error_set(err, PK_ERR_INVALID, "field '%s' is not valid UTF-8", name);
    json_decref(check);
    *out = malloc(o->via.str.size + 1);
    if (!*out)
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    memcpy(*out, bytes, o->via.str.size);
    (*out)[o->via.str.size] = '\0';
    return PK_OK;
}

int pk_request_int(const pk_request *r, const char *name, long long *out, int *present,
                   pk_error *err) {
    *present = 0;
    const msgpack_object *o = pk_request_field(r, name);
    if (!o || o->type == MSGPACK_OBJECT_NIL)
        return PK_OK;
    if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
        *out = o->via.i64;
    else if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 <= (uint64_t)INT64_MAX)
        *out = (long long)o->via.u64;
    else
        return pk_error_set(err, PK_ERR_INVALID, "field '%s' must be an integer (int64)", name);
    *present = 1;
    return PK_OK;
}

int pk_request_copy_id(const pk_request *r, char **out, size_t *len, pk_error *err) {
    *out = NULL;
    *len = 0;
    if (!r->id)
        return PK_OK;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    if (msgpack_pack_object(&pk, *r->id)) {
        msgpack_sbuffer_destroy(&sb);
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    }
    *len = sb.size;
    *out = msgpack_sbuffer_release(&sb);
    msgpack_sbuffer_destroy(&sb);
    return PK_OK;
}
