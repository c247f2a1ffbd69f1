/* Option values (pk_cli_args.h): what is accepted, what is refused, and that a refused value
 * leaves the option as it was. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "pk_cli_args.h"

static void integers_in_range(void **state) {
    (void)state;
    long v = -7;
    assert_int_equal(pk_arg_long("test", "--n", "5", 1, 10, &v), 0);
    assert_int_equal(v, 5);
    assert_int_equal(pk_arg_long("test", "--n", "1", 1, 10, &v), 0);
    assert_int_equal(v, 1);
    assert_int_equal(pk_arg_long("test", "--n", "10", 1, 10, &v), 0);
    assert_int_equal(v, 10);
    assert_int_equal(pk_arg_long("test", "--n", "-1", -1, 10, &v), 0);
    assert_int_equal(v, -1);
}

static void integers_refused(void **state) {
    (void)state;
    static const char *const bad[] = {"0",   "11", "x",   "",    "5x",
                                      "5.0", " ",  "0x5", "1e1", "99999999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        long v = -7;
        assert_int_equal(pk_arg_long("test", "--n", bad[i], 1, 10, &v), -1);
        assert_int_equal(v, -7);
    }
    long v = -7;
    assert_int_equal(pk_arg_long("test", "--n", NULL, 1, 10, &v), -1); /* value missing */
    assert_int_equal(v, -7);
}

static void positive_numbers(void **state) {
    (void)state;
    double x = -1;
    assert_int_equal(pk_arg_positive("test", "--x", "0.25", "number", &x), 0);
    assert_true(x == 0.25);
    assert_int_equal(pk_arg_positive("test", "--x", "1e12", "number", &x), 0);
    assert_true(x == 1e12);
    static const char *const bad[] = {"0", "-1", "abc", "", "1e13", "nan", "inf", "2s", "1e999"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        x = -1;
        assert_int_equal(pk_arg_positive("test", "--x", bad[i], "number", &x), -1);
        assert_true(x == -1);
    }
    assert_int_equal(pk_arg_positive("test", "--x", NULL, "number", &x), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(integers_in_range),
        cmocka_unit_test(integers_refused),
        cmocka_unit_test(positive_numbers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
