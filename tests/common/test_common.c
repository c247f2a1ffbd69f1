#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "pk_common.h"

static void sha256_known_vectors(void **state) {
    (void)state;
    char hex[65];
    pk_sha256_hex("", 0, hex);
    assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    pk_sha256_hex("abc", 3, hex);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    /* Two blocks, split across updates. */
    const char *msg = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    pk_sha256 h;
    uint8_t d[32];
    pk_sha256_init(&h);
    pk_sha256_update(&h, msg, 10);
    pk_sha256_update(&h, msg + 10, strlen(msg) - 10);
    pk_sha256_final(&h, d);
    assert_int_equal(d[0], 0x24);
    assert_int_equal(d[31], 0xc1);
}

static void strbuf_grows_and_formats(void **state) {
    (void)state;
    pk_strbuf sb = {0};
    for (int i = 0; i < 1000; i++)
        assert_int_equal(pk_strbuf_printf(&sb, "%d,", i), PK_OK);
    assert_int_equal(strncmp(sb.data, "0,1,2,", 6), 0);
    assert_true(sb.len > 3000);
    char *s = pk_strbuf_take(&sb);
    assert_null(sb.data);
    assert_int_equal(s[strlen(s) - 1], ',');
    free(s);
    char *empty = pk_strbuf_take(&sb);
    assert_string_equal(empty, "");
    free(empty);
}

static void status_names_round_trip(void **state) {
    (void)state;
    for (int s = 0; s < PK_STATUS_COUNT; s++)
        assert_int_equal(pk_status_from_name(pk_status_name((pk_status)s)), s);
    assert_string_equal(pk_status_name(PK_STATUS_COMPILE_ERROR), "compile_error");
    assert_int_equal(pk_status_from_name("bogus"), -1);
}

static void files_round_trip(void **state) {
    (void)state;
    char dir[] = "/tmp/pk_test_common_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char *sub = pk_path_join(dir, "a/b/c");
    pk_error err = {0};
    assert_int_equal(pk_mkdir_p(sub, &err), PK_OK);
    char *file = pk_path_join(sub, "f.txt");
    assert_int_equal(pk_write_file(file, "hello", 5, &err), PK_OK);
    char *data = NULL;
    size_t len = 0;
    assert_int_equal(pk_read_file(file, &data, &len, &err), PK_OK);
    assert_int_equal(len, 5);
    assert_string_equal(data, "hello");
    free(data);
    assert_int_equal(pk_read_file("/nonexistent/x", &data, &len, &err), PK_ERR_NOT_FOUND);
    assert_non_null(strstr(err.message, "/nonexistent/x"));
    assert_int_equal(pk_rm_rf(dir), PK_OK);
    assert_false(pk_path_exists(dir));
    free(file);
    free(sub);
}

static unsigned mode_of(const char *path) {
    struct stat st;
    assert_int_equal(lstat(path, &st), 0);
    return (unsigned)(st.st_mode & 07777);
}

/* Private files and directories: created 0600 / 0700, tightened when they exist, never written
 * through a symlink. */
static void private_files(void **state) {
    (void)state;
    char dir[] = "/tmp/pk_test_private_XXXXXX";
    assert_non_null(mkdtemp(dir));
    mode_t old = umask(0);
    char *data_dir = pk_path_join(dir, "x/data");
    pk_error err = {0};
    int tightened = -1;
    assert_int_equal(pk_mkdir_private(data_dir, &tightened, &err), PK_OK);
    assert_int_equal(mode_of(data_dir), 0700);
    assert_int_equal(tightened, 0);
    chmod(data_dir, 0755);
    assert_int_equal(pk_mkdir_private(data_dir, &tightened, &err), PK_OK);
    assert_int_equal(mode_of(data_dir), 0700);
    assert_int_equal(tightened, 1);
    char *file = pk_path_join(data_dir, "f");
    assert_int_equal(pk_write_file(file, "a", 1, &err), PK_OK); /* the plain one: 0644 */
    assert_int_equal(mode_of(file), 0644);
    assert_int_equal(pk_write_file_private(file, "b", 1, &err), PK_OK);
    assert_int_equal(mode_of(file), 0600);
    char *link = pk_path_join(data_dir, "link");
    assert_int_equal(symlink(file, link), 0);
    assert_int_not_equal(pk_write_file_private(link, "c", 1, &err), PK_OK);
    assert_int_equal(pk_write_file(file, "x", 1, &err), PK_OK);
    assert_int_not_equal(pk_mkdir_private(file, NULL, &err), PK_OK); /* not a directory */
    umask(old);
    assert_int_equal(pk_rm_rf(dir), PK_OK);
    free(link);
    free(file);
    free(data_dir);
}

static void utf8_repair(void **state) {
    (void)state;
    char *s = pk_utf8_sanitize("a\xe2\x82\xac b\xff c\xed\xa0\x80");
    assert_string_equal(s, "a\xe2\x82\xac b\xef\xbf\xbd c\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
    free(s);
    char buf[6] = "ab\xff\xff";
    pk_utf8_sanitize_buf(buf, sizeof buf); /* "ab" + U+FFFD fits, the second does not */
    assert_string_equal(buf, "ab\xef\xbf\xbd");
    assert_null(pk_utf8_sanitize(NULL));
}

static void clocks_agree(void **state) {
    (void)state;
    double ms = pk_now_ms(), us = pk_now_us(), ms2 = pk_now_ms();
    assert_true(us >= ms * 1e3 - 1 && us <= ms2 * 1e3 + 1); /* one clock, in its units */
    double t0 = pk_now_us();
    usleep(20000);
    double waited = pk_now_us() - t0;
    assert_true(waited >= 20000 && waited < 2e6);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sha256_known_vectors),
        cmocka_unit_test(strbuf_grows_and_formats),
        cmocka_unit_test(status_names_round_trip),
        cmocka_unit_test(files_round_trip),
        cmocka_unit_test(private_files),
        cmocka_unit_test(utf8_repair),
        cmocka_unit_test(clocks_agree),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
