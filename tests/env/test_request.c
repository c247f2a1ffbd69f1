/* Unit tests of request decoding and the msgpack <-> JSON wire encoding. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pk_client.h"
#include "pk_protocol.h"
#include "pk_common.h"

typedef struct packed {
    msgpack_sbuffer sb;
    msgpack_packer pk;
} packed;

static void packed_init(packed *p) {
    msgpack_sbuffer_init(&p->sb);
    msgpack_packer_init(&p->pk, &p->sb, msgpack_sbuffer_write);
}

static void pack_str(msgpack_packer *pk, const char *s) {
    msgpack_pack_str(pk, strlen(s));
    msgpack_pack_str_body(pk, s, strlen(s));
}

static int decode(packed *p, pk_request *r, pk_error *err) {
    return pk_request_decode(r, p->sb.data, p->sb.size, 1 << 20, err);
}

static void test_valid_request_with_id(void **state) {
    (void)state;
    packed p;
    packed_init(&p);
    msgpack_pack_map(&p.pk, 3);
    pack_str(&p.pk, "op");
    pack_str(&p.pk, "hello");
    pack_str(&p.pk, "id");
    msgpack_pack_array(&p.pk, 2);
    msgpack_pack_int(&p.pk, -7);
    msgpack_pack_nil(&p.pk);
    pack_str(&p.pk, "seed");
    msgpack_pack_int64(&p.pk, 42);
    pk_request r;
    pk_error err;
    assert_int_equal(decode(&p, &r, &err), PK_OK);
    assert_string_equal(r.op, "hello");
    assert_non_null(r.id);
    assert_int_equal(r.id->type, MSGPACK_OBJECT_ARRAY);
    long long seed = 0;
    int present = 0;
    assert_int_equal(pk_request_int(&r, "seed", &seed, &present, &err), PK_OK);
    assert_int_equal(present, 1);
    assert_int_equal(seed, 42);
    char *raw;
    size_t len;
    assert_int_equal(pk_request_copy_id(&r, &raw, &len, &err), PK_OK);
    assert_int_equal(len, 3); /* fixarray(2), -7, nil */
    assert_memory_equal(raw, "\x92\xf9\xc0", 3);
    free(raw);
    pk_request_free(&r);
    msgpack_sbuffer_destroy(&p.sb);
}

static void expect_bad(const void *data, size_t len, const char *needle) {
    pk_request r;
    pk_error err;
    pk_error_clear(&err);
    assert_int_equal(pk_request_decode(&r, data, len, 1 << 20, &err), PK_ERR_INVALID);
    if (!strstr(err.message, needle))
        fail_msg("message '%s' lacks '%s'", err.message, needle);
    pk_request_free(&r);
}

static void test_malformed_frames(void **state) {
    (void)state;
    expect_bad("", 0, "truncated");
    expect_bad("\xc1", 1, "invalid byte");
    expect_bad("\x93\x01\x02\x03", 4, "not a msgpack map");
    expect_bad("\x81\xa2op\x05", 5, "'op' must be a string");
    expect_bad("\x80", 1, "'op' is required");
    expect_bad("\x80\x80", 2, "trailing bytes");
    /* map32 claiming 2^32-1 entries in a 5-byte frame */
    expect_bad("\xdf\xff\xff\xff\xff", 5, "declares");
    /* str32 of 4 GiB in a 6-byte frame */
    expect_bad("\xdb\xff\xff\xff\xff\x41", 6, "runs past the end");
}

static void test_deep_nesting_rejected(void **state) {
    (void)state;
    size_t depth = 1000;
    unsigned char *buf = malloc(depth * 2 + 1);
    for (size_t i = 0; i < depth; i++) {
        buf[2 * i] = 0x81; /* {"": ...} */
        buf[2 * i + 1] = 0xa0;
    }
    buf[2 * depth] = 0xc0;
    expect_bad(buf, depth * 2 + 1, "deeper than 32");
    free(buf);
}

static void test_size_limit(void **state) {
    (void)state;
    pk_request r;
    pk_error err;
    assert_int_equal(pk_request_decode(&r, "\x80", 1, 0, &err), PK_ERR_INVALID);
    assert_non_null(strstr(err.message, "max_request_bytes"));
    pk_request_free(&r);
}

static void test_field_types_named(void **state) {
    (void)state;
    packed p;
    packed_init(&p);
    msgpack_pack_map(&p.pk, 3);
    pack_str(&p.pk, "op");
    pack_str(&p.pk, "reset");
    pack_str(&p.pk, "problem");
    msgpack_pack_int(&p.pk, 5);
    pack_str(&p.pk, "seed");
    pack_str(&p.pk, "x");
    pk_request r;
    pk_error err;
    assert_int_equal(decode(&p, &r, &err), PK_OK);
    char *s;
    assert_int_equal(pk_request_str(&r, "problem", 1, 100, &s, &err), PK_ERR_INVALID);
    assert_non_null(strstr(err.message, "'problem' must be a string"));
    long long v;
    int present;
    assert_int_equal(pk_request_int(&r, "seed", &v, &present, &err), PK_ERR_INVALID);
    assert_non_null(strstr(err.message, "'seed'"));
    assert_int_equal(pk_request_str(&r, "group", 1, 100, &s, &err), PK_ERR_INVALID);
    assert_non_null(strstr(err.message, "'group' is required"));
    assert_int_equal(pk_request_str(&r, "group", 0, 100, &s, &err), PK_OK);
    assert_null(s);
    pk_request_free(&r);
    msgpack_sbuffer_destroy(&p.sb);
}

static void test_json_round_trip(void **state) {
    (void)state;
    json_t *v = json_loads("{\"a\": [1, -2, 2.5, true, null, \"x\"], \"b\": {\"c\": {}}}", 0, NULL);
    assert_non_null(v);
    packed p;
    packed_init(&p);
    assert_int_equal(pk_msgpack_pack_json(&p.pk, v), 0);
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    assert_int_equal(msgpack_unpack_next(&u, p.sb.data, p.sb.size, &off), MSGPACK_UNPACK_SUCCESS);
    json_t *back;
    pk_error err;
    assert_int_equal(pk_json_from_msgpack(&u.data, "v", 8, &back, &err), PK_OK);
    assert_true(json_equal(v, back));
    /* 2.5 stays a float and -2 an integer */
    assert_true(json_is_real(json_array_get(json_object_get(back, "a"), 2)));
    assert_true(json_is_integer(json_array_get(json_object_get(back, "a"), 1)));
    json_decref(back);
    assert_int_equal(pk_json_from_msgpack(&u.data, "v", 1, &back, &err), PK_ERR_INVALID);
    assert_non_null(strstr(err.message, "v.a[0]: nested deeper than 1 levels"));
    json_decref(v);
    msgpack_unpacked_destroy(&u);
    msgpack_sbuffer_destroy(&p.sb);
}

static void test_json_rejects_binary_and_int_keys(void **state) {
    (void)state;
    packed p;
    packed_init(&p);
    msgpack_pack_map(&p.pk, 1);
    pack_str(&p.pk, "reward");
    msgpack_pack_map(&p.pk, 1);
    msgpack_pack_int(&p.pk, 3);
    msgpack_pack_bin(&p.pk, 1);
    msgpack_pack_bin_body(&p.pk, "z", 1);
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    assert_int_equal(msgpack_unpack_next(&u, p.sb.data, p.sb.size, &off), MSGPACK_UNPACK_SUCCESS);
    json_t *out;
    pk_error err;
    assert_int_equal(pk_json_from_msgpack(&u.data, "options", 8, &out, &err), PK_ERR_INVALID);
    assert_non_null(strstr(err.message, "options.reward: map key is not a string"));
    msgpack_unpacked_destroy(&u);
    msgpack_sbuffer_destroy(&p.sb);
}

/* Found by the fuzzer: a key holding NUL leaked the converted value. */
static void test_json_rejects_nul_key(void **state) {
    (void)state;
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    const char frame[] = "\x81\xa3\x61\x00\x62\x81\xa1x\x01"; /* {"a\0b": {"x": 1}} */
    assert_int_equal(msgpack_unpack_next(&u, frame, sizeof frame - 1, &off),
                     MSGPACK_UNPACK_SUCCESS);
    json_t *out;
    pk_error err;
    assert_int_equal(pk_json_from_msgpack(&u.data, "options", 8, &out, &err), PK_ERR_INVALID);
    assert_non_null(strstr(err.message, "invalid map key"));
    msgpack_unpacked_destroy(&u);
}

/* Found by the fuzzer: msgpack-c hands out a NULL pointer for "", which reached memchr. Empty
 * strings are legal everywhere: as a JSON key, a JSON value and a request field. */
static void test_empty_strings(void **state) {
    (void)state;
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    size_t off = 0;
    const char frame[] = "\x82\xa0\xa0\xa1k\xa0"; /* {"": "", "k": ""} */
    assert_int_equal(msgpack_unpack_next(&u, frame, sizeof frame - 1, &off),
                     MSGPACK_UNPACK_SUCCESS);
    json_t *out;
    pk_error err;
    assert_int_equal(pk_json_from_msgpack(&u.data, "options", 8, &out, &err), PK_OK);
    assert_string_equal(json_string_value(json_object_get(out, "")), "");
    assert_string_equal(json_string_value(json_object_get(out, "k")), "");
    json_decref(out);
    msgpack_unpacked_destroy(&u);

    packed p;
    packed_init(&p);
    msgpack_pack_map(&p.pk, 2);
    pack_str(&p.pk, "op");
    pack_str(&p.pk, "step");
    pack_str(&p.pk, "summary");
    pack_str(&p.pk, "");
    pk_request r;
    assert_int_equal(decode(&p, &r, &err), PK_OK);
    char *s = NULL;
    assert_int_equal(pk_request_str(&r, "summary", 1, 100, &s, &err), PK_OK);
    assert_string_equal(s, "");
    free(s);
    pk_request_free(&r);
    msgpack_sbuffer_destroy(&p.sb);
}

static void test_utf8_sanitize(void **state) {
    (void)state;
    char *clean = pk_utf8_sanitize("ok \xc3\xa9 \xff bad \xe2\x82 cut \xed\xa0\x80 surrogate");
    assert_string_equal(clean, "ok \xc3\xa9 \xef\xbf\xbd bad \xef\xbf\xbd\xef\xbf\xbd cut "
                               "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd surrogate");
    json_t *j = json_string(clean); /* jansson accepts only valid UTF-8 */
    assert_non_null(j);
    json_decref(j);
    free(clean);
    assert_null(pk_utf8_sanitize(NULL));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_request_with_id),
        cmocka_unit_test(test_malformed_frames),
        cmocka_unit_test(test_deep_nesting_rejected),
        cmocka_unit_test(test_size_limit),
        cmocka_unit_test(test_field_types_named),
        cmocka_unit_test(test_json_round_trip),
        cmocka_unit_test(test_json_rejects_binary_and_int_keys),
        cmocka_unit_test(test_json_rejects_nul_key),
        cmocka_unit_test(test_empty_strings),
        cmocka_unit_test(test_utf8_sanitize),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
