/* pk_sandbox_run's API: arguments, verdict fields, stdin, output cap, environment, fd hygiene,
 * and the JSON form (parsed back with jansson). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <fcntl.h>
#include <jansson.h>
#include <errno.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pk_sandbox.h"

static pk_sandbox_result run_sh(pk_sandbox_opts *o, const char *script) {
    char *argv[] = {"/bin/sh", "-c", (char *)script, NULL};
    pk_sandbox_result r;
    pk_error err = {0};
    assert_int_equal(pk_sandbox_run(o, argv, &r, &err), PK_OK);
    return r;
}

static void bad_arguments_are_errors(void **state) {
    (void)state;
    pk_sandbox_opts o = {0};
    pk_sandbox_result r;
    pk_error err = {0};
    char *empty[] = {NULL};
    assert_int_equal(pk_sandbox_run(&o, empty, &r, &err), PK_ERR_INVALID);
    assert_non_null(strstr(err.message, "argv"));
    char *argv[] = {"/bin/true", NULL};
    o.n_gpus = 1; /* without a list */
    assert_int_equal(pk_sandbox_run(&o, argv, &r, &err), PK_ERR_INVALID);
}

static void exit_code_and_streams(void **state) {
    (void)state;
    pk_sandbox_opts o = {0};
    pk_sandbox_result r = run_sh(&o, "echo out; echo err >&2; exit 7");
    assert_int_equal(r.status, PK_SB_EXIT);
    assert_int_equal(r.exit_code, 7);
    assert_string_equal(r.out, "out\n");
    assert_int_equal(r.out_len, 4);
    assert_string_equal(r.err, "err\n");
    assert_false(r.truncated);
    assert_true(r.wall_ms > 0);
    assert_true(r.max_rss_kb > 0);
    assert_string_equal(r.detail, "");
    assert_non_null(strstr(r.limits, "wall=supervisor"));
    pk_sandbox_result_free(&r);
}

static void stdin_is_fed(void **state) {
    (void)state;
    static char big[200000];
    memset(big, 'a', sizeof big);
    pk_sandbox_opts o = {0};
    o.stdin_data = big;
    o.stdin_len = sizeof big;
    pk_sandbox_result r = run_sh(&o, "wc -c");
    assert_int_equal(r.status, PK_SB_OK);
    assert_int_equal(atoi(r.out), (int)sizeof big);
    pk_sandbox_result_free(&r);
    o.stdin_data = NULL; /* /dev/null */
    r = run_sh(&o, "wc -c");
    assert_int_equal(atoi(r.out), 0);
    pk_sandbox_result_free(&r);
}

/* The caller's deadline (pk_sandbox_opts.deadline_ms) is read afresh: moved later before it
 * fires, it no longer ends the job; moved earlier, it does. */
static double moving_deadline;

static void *move_deadline_later(void *arg) {
    (void)arg;
    usleep(100 * 1000);
    pk_deadline_store(&moving_deadline, pk_now_ms() + 5000);
    return NULL;
}

static void deadline_moves_both_ways(void **state) {
    (void)state;
    pk_sandbox_opts o = {0};
    o.wall_ms = 10000;
    o.deadline_ms = &moving_deadline;
    pk_deadline_store(&moving_deadline, pk_now_ms() + 400);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, move_deadline_later, NULL), 0);
    pk_sandbox_result r = run_sh(&o, "sleep 1");
    pthread_join(t, NULL);
    assert_int_equal(r.status, PK_SB_OK); /* 400 ms had been moved to 5 s before it came */
    pk_sandbox_result_free(&r);
    pk_deadline_store(&moving_deadline, pk_now_ms() + 300);
    r = run_sh(&o, "sleep 5");
    assert_int_equal(r.status, PK_SB_TIMEOUT);
    assert_true(r.wall_ms < 3000);
    pk_sandbox_result_free(&r);
}

/* pk_sandbox_opts.nice: the command (and what it starts) runs nicer than the caller. */
static void nice_lowers_priority(void **state) {
    (void)state;
    errno = 0;
    int mine = getpriority(PRIO_PROCESS, 0);
    pk_sandbox_opts o = {0};
    o.nice = 7;
    pk_sandbox_result r = run_sh(&o, "nice");
    assert_int_equal(r.status, PK_SB_OK);
    assert_int_equal(atoi(r.out), mine + 7 > 19 ? 19 : mine + 7);
    pk_sandbox_result_free(&r);
    o.nice = 0;
    r = run_sh(&o, "nice");
    assert_int_equal(atoi(r.out), mine);
    pk_sandbox_result_free(&r);
}

static void output_is_capped_not_fatal(void **state) {
    (void)state;
    pk_sandbox_opts o = {0};
    o.output_cap = 100;
    pk_sandbox_result r = run_sh(&o, "head -c 5000 /dev/zero | tr '\\0' x");
    assert_int_equal(r.status, PK_SB_OK); /* over the cap but not a flood: kept running */
    assert_true(r.truncated);
    assert_int_equal(r.out_len, 100);
    pk_sandbox_result_free(&r);
    o.keep_tail = 1;
    r = run_sh(&o, "seq 1 20000");
    assert_true(r.truncated);
    assert_int_equal(r.out_len, 100);
    assert_memory_equal(r.out + 100 - 12, "19999\n20000\n", 12);
    pk_sandbox_result_free(&r);
}

static void environment_default_and_forced(void **state) {
    (void)state;
    pk_sandbox_opts o = {0};
    pk_sandbox_result r = run_sh(&o, "echo $NCCL_NVLS_ENABLE:$NCCL_SOCKET_IFNAME:$HOME:$PATH");
    assert_int_equal(r.status, PK_SB_OK);
    assert_memory_equal(r.out, "0:lo:/", 6);
    assert_non_null(strstr(r.out, "/usr/local/cuda/bin"));
    pk_sandbox_result_free(&r);
    const char *env[] = {"NCCL_NVLS_ENABLE=1", "FOO=bar", NULL};
    o.env = env;
    r = run_sh(&o, "echo $NCCL_NVLS_ENABLE:$FOO");
    assert_string_equal(r.out, "0:bar\n"); /* never removed or overridden */
    pk_sandbox_result_free(&r);
    const char *add[] = {"FOO=baz", "EXTRA=1", "NCCL_NVLS_ENABLE=1", NULL};
    o.env_add = add; /* added to env (FOO replaced) */
    r = run_sh(&o, "echo $NCCL_NVLS_ENABLE:$FOO:$EXTRA");
    assert_string_equal(r.out, "0:baz:1\n");
    pk_sandbox_result_free(&r);
    o.env = NULL; /* added to the default */
    r = run_sh(&o, "echo $NCCL_NVLS_ENABLE:$FOO:$NCCL_SOCKET_IFNAME");
    assert_string_equal(r.out, "0:baz:lo\n");
    pk_sandbox_result_free(&r);
}

static void caller_fds_are_not_inherited(void **state) {
    (void)state;
    int leaky = open("/dev/null", O_RDONLY); /* no O_CLOEXEC on purpose */
    assert_true(leaky >= 0);
    pk_sandbox_opts o = {0};
    char script[128];
    snprintf(script, sizeof script, "ls /proc/self/fd; test -e /proc/self/fd/%d && exit 9; exit 0",
             leaky);
    pk_sandbox_result r = run_sh(&o, script);
    assert_int_equal(r.status, PK_SB_OK);
    close(leaky);
    pk_sandbox_result_free(&r);
}

static void missing_paths_are_setup_errors(void **state) {
    (void)state;
    pk_sandbox_opts o = {0};
    o.workdir = "/nonexistent/pk-workdir";
    pk_sandbox_result r = run_sh(&o, "true");
    assert_int_equal(r.status, PK_SB_SETUP_ERROR);
    assert_non_null(strstr(r.detail, "workdir"));
    pk_sandbox_result_free(&r);
    const char *ro[] = {"/nonexistent/pk-ro"};
    o.workdir = NULL;
    o.ro = ro;
    o.n_ro = 1;
    r = run_sh(&o, "true");
    assert_int_equal(r.status, PK_SB_SETUP_ERROR);
    assert_non_null(strstr(r.detail, "pk-ro"));
    pk_sandbox_result_free(&r);
    o.n_ro = 0;
    const char *rw[] = {"/"};
    o.rw = rw;
    o.n_rw = 1;
    r = run_sh(&o, "true");
    assert_int_equal(r.status, PK_SB_SETUP_ERROR);
    assert_non_null(strstr(r.detail, "temp area"));
    pk_sandbox_result_free(&r);
    o.n_rw = 0;
    o.workdir = "/tmp"; /* holds every job's root */
    r = run_sh(&o, "true");
    assert_int_equal(r.status, PK_SB_SETUP_ERROR);
    pk_sandbox_result_free(&r);
}

static void extra_ro_is_visible_read_only(void **state) {
    (void)state;
    char dir[] = "/tmp/pk-sb-api-ro-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char file[64];
    snprintf(file, sizeof file, "%s/f", dir);
    assert_int_equal(pk_write_file(file, "hello", 5, NULL), PK_OK);
    const char *ro[] = {dir};
    pk_sandbox_opts o = {0};
    o.ro = ro;
    o.n_ro = 1;
    char script[200];
    snprintf(script, sizeof script, "cat %s; echo x > %s && exit 3; exit 0", file, file);
    pk_sandbox_result r = run_sh(&o, script);
    assert_int_equal(r.status, PK_SB_OK);
    assert_string_equal(r.out, "hello");
    pk_sandbox_result_free(&r);
    unlink(file);
    rmdir(dir);
}

/* Issue 27, finding 7: PID 1 of the sandbox is a fork of the caller (the server), and its
 * /proc/1/cmdline was the caller's argv (data directory, key paths, hook specs). Now it reads
 * only a title, its environment nothing, and its name is no longer the caller's. */
static const char *self_path = "test_sandbox_api"; /* argv[0] */

static void pid1_shows_nothing_of_the_caller(void **state) {
    (void)state;
    const char *self = self_path;
    pk_sandbox_opts o = {0};
    pk_sandbox_result r = run_sh(&o, "tr '\\0' '|' < /proc/1/cmdline; echo; cat /proc/1/comm;"
                                     "tr '\\0' '\\n' < /proc/1/environ 2>/dev/null | grep -c =");
    assert_int_equal(r.status, PK_SB_EXIT); /* grep -c found nothing */
    printf("PID 1: %s", r.out);
    assert_string_equal(r.out, "pkgym-sandbox-init|\npkgym-init\n0\n");
    const char *base = strrchr(self, '/');
    assert_null(strstr(r.out, base ? base + 1 : self));
    pk_sandbox_result_free(&r);
}

/* opts.hide: a directory inside a read-only bind shown empty and read-only, the rest of the
 * bind as it is (issue 27, finding 7: the problems' solutions/). */
static void hidden_dirs_are_empty(void **state) {
    (void)state;
    char dir[] = "/tmp/pk-sb-hide-XXXXXX", sol[64], keep[64], secret[96], cmd[1024];
    assert_non_null(mkdtemp(dir));
    snprintf(sol, sizeof sol, "%s/solutions", dir);
    snprintf(keep, sizeof keep, "%s/meta.json", dir);
    snprintf(secret, sizeof secret, "%s/correct.cu", sol);
    assert_int_equal(mkdir(sol, 0755), 0);
    pk_error err;
    assert_int_equal(pk_write_file(secret, "secret", 6, &err), PK_OK);
    assert_int_equal(pk_write_file(keep, "{}", 2, &err), PK_OK);
    const char *ro[] = {dir}, *hide[] = {sol, "/nonexistent/solutions"};
    pk_sandbox_opts o = {.ro = ro, .n_ro = 1, .hide = hide, .n_hide = 2};
    snprintf(cmd, sizeof cmd,
             "cat %s; echo; ls -A %s | wc -l; cat %s 2>/dev/null || echo unreadable;"
             "touch %s/x 2>/dev/null || echo read-only",
             keep, sol, secret, sol);
    pk_sandbox_result r = run_sh(&o, cmd);
    assert_int_equal(r.status, PK_SB_OK);
    assert_string_equal(r.out, "{}\n0\nunreadable\nread-only\n");
    pk_sandbox_result_free(&r);
    o.n_hide = 0; /* the control: without hide the file is there */
    r = run_sh(&o, cmd);
    assert_non_null(strstr(r.out, "secret"));
    pk_sandbox_result_free(&r);
    pk_rm_rf(dir);
}

static void json_is_valid_and_complete(void **state) {
    (void)state;
    pk_sandbox_result r;
    memset(&r, 0, sizeof r);
    r.status = PK_SB_OUTPUT_LIMIT;
    r.exit_code = 3;
    r.signal = 25;
    r.wall_ms = 1.5;
    char out[] = "a\"b\\c\n\x01\xff\xc3\xa9"; /* quote, backslash, control, invalid, valid é */
    r.out = out;
    r.out_len = sizeof out - 1;
    r.err = "";
    r.truncated = 1;
    strcpy(r.detail, "d");
    char *s = pk_sandbox_result_to_json(&r);
    assert_non_null(s);
    json_error_t je;
    json_t *j = json_loads(s, 0, &je);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "status")), "output_limit");
    assert_int_equal(json_integer_value(json_object_get(j, "exit_code")), 3);
    assert_int_equal(json_integer_value(json_object_get(j, "signal")), 25);
    assert_true(json_is_true(json_object_get(j, "truncated")));
    assert_string_equal(json_string_value(json_object_get(j, "stdout")),
                        "a\"b\\c\n\x01\xef\xbf\xbd\xc3\xa9");
    const char *keys[] = {"wall_ms", "cpu_ms", "max_rss_kb", "stderr", "detail", "limits"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        assert_non_null(json_object_get(j, keys[i]));
    json_decref(j);
    free(s);
    assert_string_equal(pk_sb_status_name(PK_SB_SETUP_ERROR), "setup_error");
    assert_string_equal(pk_sb_status_name((pk_sb_status)99), "unknown");
}

int main(int argc, char **argv) {
    if (argc > 0)
        self_path = argv[0];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bad_arguments_are_errors),
        cmocka_unit_test(exit_code_and_streams),
        cmocka_unit_test(stdin_is_fed),
        cmocka_unit_test(output_is_capped_not_fatal),
        cmocka_unit_test(deadline_moves_both_ways),
        cmocka_unit_test(nice_lowers_priority),
        cmocka_unit_test(environment_default_and_forced),
        cmocka_unit_test(caller_fds_are_not_inherited),
        cmocka_unit_test(missing_paths_are_setup_errors),
        cmocka_unit_test(extra_ro_is_visible_read_only),
        cmocka_unit_test(json_is_valid_and_complete),
        cmocka_unit_test(pid1_shows_nothing_of_the_caller),
        cmocka_unit_test(hidden_dirs_are_empty),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
