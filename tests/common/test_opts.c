/* The option tables (pk_opts.h): every kind of row parses and refuses as documented, a refused
 * value leaves its destination as it was, and --help is generated from the same rows. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pk_opts.h"

typedef struct demo {
    int flag, n, n_binds, color;
    long big;
    size_t bytes;
    double secs, ratio;
    const char *dir, *binds[3];
} demo;

static int parse_color(const char *cmd, const char *name, const char *v, void *dest) {
    if (strcmp(v, "red") == 0 || strcmp(v, "blue") == 0) {
        *(int *)dest = v[0] == 'r' ? 1 : 2;
        return 0;
    }
    fprintf(stderr, "pkgym %s: %s wants red or blue, got '%s'\n", cmd, name, v);
    return -1;
}

#define ROWS 10
static void table(demo *d, pk_opt t[ROWS]) {
    pk_opt rows[ROWS] = {
        {.type = PK_OPT_SIZE,
         .name = "--bytes",
         .metavar = "N",
         .help = "bytes",
         .dest = &d->bytes,
         .lo = 4096,
         .hi = 1L << 40},
        {.type = PK_OPT_FLAG, .name = "--flag", .help = "a flag", .dest = &d->flag},
        {.type = PK_OPT_INT,
         .name = "--n",
         .metavar = "N",
         .help = "a count",
         .dest = &d->n,
         .lo = 1,
         .hi = 10,
         .alias = "-n"},
        {.type = PK_OPT_LONG,
         .name = "--big",
         .metavar = "N",
         .help = "big",
         .dest = &d->big,
         .lo = -1,
         .hi = 1L << 40},
        {.type = PK_OPT_SECONDS,
         .name = "--secs",
         .metavar = "S",
         .help = "seconds",
         .dest = &d->secs,
         .lo = 1,
         .hi = 60},
        {.type = PK_OPT_POSITIVE,
         .name = "--ratio",
         .metavar = "X",
         .help = "ratio",
         .dest = &d->ratio},
        {.type = PK_OPT_SECTION, .help = "Places:"},
        {.type = PK_OPT_STR,
         .name = "--dir",
         .metavar = "DIR",
         .help = "a directory",
         .dest = &d->dir},
        {.type = PK_OPT_STR_LIST,
         .name = "--bind",
         .metavar = "ENDPOINT",
         .help = "an endpoint; repeatable\n(at most 3)",
         .dest = d->binds,
         .count = &d->n_binds,
         .max = 3},
        {.type = PK_OPT_CUSTOM,
         .name = "--a-rather-long-option-name",
         .metavar = "COLOR",
         .help = "red or blue",
         .dest = &d->color,
         .parse = parse_color},
    };
    memcpy(t, rows, sizeof rows);
}

static int parse(demo *d, int argc, char **argv, int flags, int *next) {
    pk_opt t[ROWS];
    table(d, t);
    return pk_opts_parse("test", t, ROWS, argc, argv, 1, flags, next);
}

static void every_kind_parses(void **state) {
    (void)state;
    demo d = {0};
    char *argv[] = {"test",   "--flag", "-n",      "7",        "--big=1099511627776",
                    "--secs", "30",     "--ratio", "0.5",      "--dir",
                    "/x",     "--bind", "a",       "--bind=b", "--a-rather-long-option-name",
                    "blue"};
    int argc = (int)(sizeof argv / sizeof *argv), next = -1;
    assert_int_equal(parse(&d, argc, argv, 0, &next), PK_OPTS_OK);
    assert_int_equal(next, argc);
    assert_int_equal(d.flag, 1);
    assert_int_equal(d.n, 7);
    assert_true(d.big == 1L << 40);
    assert_true(d.secs == 30.0);
    assert_true(d.ratio == 0.5);
    assert_string_equal(d.dir, "/x");
    assert_int_equal(d.n_binds, 2);
    assert_string_equal(d.binds[0], "a");
    assert_string_equal(d.binds[1], "b");
    assert_int_equal(d.color, 2);
    char *more[] = {"test", "--bytes", "8192"};
    assert_int_equal(parse(&d, 3, more, 0, NULL), PK_OPTS_OK);
    assert_true(d.bytes == 8192);
    char *small[] = {"test", "--bytes", "100"};
    assert_int_equal(parse(&d, 3, small, 0, NULL), PK_OPTS_ERROR);
    assert_true(d.bytes == 8192);
}

static void bad_input_is_refused_and_leaves_values(void **state) {
    (void)state;
    char *cases[][3] = {
        {"--n", "11", NULL},
        {"--n", "x", NULL},
        {"--n", NULL, NULL},
        {"--secs", "0", NULL},
        {"--ratio", "-1", NULL},
        {"--flag=1", NULL, NULL},
        {"--nope", "1", NULL},
        {"stray", NULL, NULL},
        {"--a-rather-long-option-name", "green", NULL},
        {"--big", "1e3", NULL},
        {"--n=", NULL, NULL},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        demo d = {.n = 3, .secs = 2, .ratio = 4, .big = 5, .color = 9};
        char *argv[4] = {"test", cases[c][0], cases[c][1], NULL};
        int argc = cases[c][1] ? 3 : 2;
        assert_int_equal(parse(&d, argc, argv, 0, NULL), PK_OPTS_ERROR);
        assert_int_equal(d.n, 3);
        assert_true(d.secs == 2 && d.ratio == 4 && d.big == 5 && d.color == 9 && !d.flag);
    }
    /* A fourth --bind is one too many. */
    demo d = {0};
    char *argv[] = {"test", "--bind", "1", "--bind", "2", "--bind", "3", "--bind", "4"};
    assert_int_equal(parse(&d, 9, argv, 0, NULL), PK_OPTS_ERROR);
    assert_int_equal(d.n_binds, 3);
}

static void help_and_positionals(void **state) {
    (void)state;
    demo d = {0};
    char *help[] = {"test", "--n", "2", "-h", "--n", "99"};
    assert_int_equal(parse(&d, 6, help, 0, NULL), PK_OPTS_HELP);
    /* Positional arguments: the parse stops at the first, or at "--" (skipped). */
    char *pos[] = {"test", "--flag", "file.cu", "--n", "2"};
    int next = -1;
    assert_int_equal(parse(&d, 5, pos, PK_OPTS_POSITIONAL, &next), PK_OPTS_OK);
    assert_int_equal(next, 2);
    char *dash[] = {"test", "--n", "4", "--", "--flag"};
    d.flag = 0;
    assert_int_equal(parse(&d, 5, dash, 0, &next), PK_OPTS_OK);
    assert_int_equal(next, 4);
    assert_int_equal(d.n, 4);
    assert_int_equal(d.flag, 0);
}

/* Options and arguments in any order (pkgym check, problems, keygen): each argument is kept in
 * order, "--" makes the rest arguments, and one too many is refused by name. */
static void arguments_among_options(void **state) {
    (void)state;
    demo d = {0};
    pk_opt t[ROWS];
    table(&d, t);
    const char *args[2];
    int n = -1;
    char *mixed[] = {"test", "a.cu", "--n", "3", "b.cu", "--flag"};
    assert_int_equal(pk_opts_parse_args("test", t, ROWS, 6, mixed, 1, args, 2, &n), PK_OPTS_OK);
    assert_int_equal(n, 2);
    assert_string_equal(args[0], "a.cu");
    assert_string_equal(args[1], "b.cu");
    assert_int_equal(d.n, 3);
    assert_int_equal(d.flag, 1);
    char *dash[] = {"test", "--n", "5", "--", "--flag"};
    d.flag = 0;
    assert_int_equal(pk_opts_parse_args("test", t, ROWS, 5, dash, 1, args, 2, &n), PK_OPTS_OK);
    assert_int_equal(n, 1);
    assert_string_equal(args[0], "--flag");
    assert_int_equal(d.flag, 0);
    char *many[] = {"test", "a", "b", "c"};
    assert_int_equal(pk_opts_parse_args("test", t, ROWS, 4, many, 1, args, 2, &n), PK_OPTS_ERROR);
    char *help[] = {"test", "a", "--help"};
    assert_int_equal(pk_opts_parse_args("test", t, ROWS, 3, help, 1, args, 2, &n), PK_OPTS_HELP);
}

static void help_is_generated_from_the_rows(void **state) {
    (void)state;
    demo d = {0};
    pk_opt t[ROWS];
    table(&d, t);
    char buf[4096] = {0};
    FILE *f = fmemopen(buf, sizeof buf - 1, "w");
    assert_non_null(f);
    pk_opts_help(f, t, ROWS);
    fclose(f);
    /* Every option is there, its help at column 26, continuation lines aligned with it. */
    assert_non_null(strstr(buf, "  --flag                  a flag\n"));
    assert_non_null(strstr(buf, "  -n, --n N               a count\n"));
    assert_non_null(strstr(buf, "\nPlaces:\n  --dir DIR"));
    assert_non_null(strstr(buf, "  --bind ENDPOINT         an endpoint; repeatable\n"
                                "                          (at most 3)\n"));
    /* A name too long for the column puts its help on the next line. */
    assert_non_null(strstr(buf, "  --a-rather-long-option-name COLOR\n"
                                "                          red or blue\n"));
}

/* The GPU lists of `serve --gpus` and `sandbox --gpus`: a repeat replaces the list, "none" is
 * empty, a value out of range or one too many is refused. */
static void int_lists_parse(void **state) {
    (void)state;
    int gpus[3] = {0}, n = -1;
    pk_opt t[] = {{.type = PK_OPT_INT_LIST,
                   .name = "--gpus",
                   .metavar = "LIST",
                   .help = "GPU indices",
                   .dest = gpus,
                   .lo = 0,
                   .hi = 7,
                   .count = &n,
                   .max = 3}};
    char *list[] = {"test", "--gpus", "5", "--gpus=2,,0"};
    assert_int_equal(pk_opts_parse("test", t, 1, 4, list, 1, 0, NULL), PK_OPTS_OK);
    assert_int_equal(n, 2);
    assert_int_equal(gpus[0], 2);
    assert_int_equal(gpus[1], 0);
    char *none[] = {"test", "--gpus", "none"};
    assert_int_equal(pk_opts_parse("test", t, 1, 3, none, 1, 0, NULL), PK_OPTS_OK);
    assert_int_equal(n, 0);
    char *bad[][3] = {
        {"test", "--gpus", "1,8"}, {"test", "--gpus", "0,1,2,3"}, {"test", "--gpus", "1,x"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_int_equal(pk_opts_parse("test", t, 1, 3, bad[i], 1, 0, NULL), PK_OPTS_ERROR);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_kind_parses),
        cmocka_unit_test(bad_input_is_refused_and_leaves_values),
        cmocka_unit_test(help_and_positionals),
        cmocka_unit_test(arguments_among_options),
        cmocka_unit_test(help_is_generated_from_the_rows),
        cmocka_unit_test(int_lists_parse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
