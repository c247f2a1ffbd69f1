/* Hooks: plugins and commands registered by name and selected per summarizer, the example
 * hooks, the fallback to the built-in when a hook crashes, hangs, prints garbage or breaks the
 * budget, and the sandbox around every hook (no host writes, no network, limits). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "pk_summarizer.h"
#include "sample_results.h"

/* The operator's registry for these tests: every fixture by name. */
static pk_hook_registry *registry;

static const char *const registered[][2] = {
    {"terse", "plugin:" PK_TEST_TERSE},
    {"verbose", "plugin:" PK_TEST_VERBOSE},
    {"crash", "plugin:" PK_TEST_FAULT_CRASH},
    {"hang", "plugin:" PK_TEST_FAULT_HANG},
    {"bad_utf8", "plugin:" PK_TEST_FAULT_BAD_UTF8},
    {"abi", "plugin:" PK_TEST_FAULT_ABI},
    {"escape", "plugin:" PK_TEST_FAULT_ESCAPE},
    {"cmd_hang", "cmd:" PK_TEST_FIXTURES "/cmd_hang.sh"},
    {"cmd_crash", "cmd:" PK_TEST_FIXTURES "/cmd_crash.sh"},
    {"cmd_garbage", "cmd:" PK_TEST_FIXTURES "/cmd_garbage.sh"},
    {"cmd_echo", "cmd:" PK_TEST_FIXTURES "/cmd_echo_hook.sh"},
    {"cmd_echo_timing", "cmd:" PK_TEST_FIXTURES "/cmd_echo_timing.sh"},
    {"cmd_no_read", "cmd:" PK_TEST_FIXTURES "/cmd_no_read.sh"},
    {"cmd_over_budget", "cmd:" PK_TEST_FIXTURES "/cmd_over_budget.sh"},
    {"history_example", "cmd:" PK_TEST_EXAMPLES "/history_cmd.py"},
};

static int setup_registry(void **state) {
    (void)state;
    registry = pk_hook_registry_new();
    for (size_t i = 0; i < sizeof registered / sizeof registered[0]; i++) {
        pk_error err = {0};
        if (pk_hook_registry_add(registry, registered[i][0], registered[i][1], &err) != PK_OK)
            fail_msg("%s", err.message);
    }
    return 0;
}

static int teardown_registry(void **state) {
    (void)state;
    pk_hook_registry_free(registry);
    registry = NULL;
    return 0;
}

static pk_summarizer *make(const char *options) {
    pk_summarizer *s = NULL;
    pk_error err = {0};
    if (pk_summarizer_create_with_hooks(options, registry, NULL, &s, &err) != PK_OK)
        fail_msg("%s", err.message);
    return s;
}

static char *hook_options(const char *slot, const char *use, int timeout_ms) {
    static char buf[1024];
    snprintf(buf, sizeof buf, "{\"hooks\": {\"%s\": \"%s\", \"timeout_ms\": %d}}", slot, use,
             timeout_ms);
    return buf;
}

static char *feedback_with(const char *use, int timeout_ms, sample_kind kind, pk_summarizer **out) {
    pk_summarizer *s = make(hook_options("feedback", use, timeout_ms));
    pk_eval_result r;
    sample_fill(&r, kind);
    char *fb = pk_summarizer_feedback(s, &r, NULL);
    sample_free(&r);
    *out = s;
    return fb;
}

static char *builtin_feedback(sample_kind kind) {
    pk_summarizer *s = make(NULL);
    pk_eval_result r;
    sample_fill(&r, kind);
    char *fb = pk_summarizer_feedback(s, &r, NULL);
    sample_free(&r);
    pk_summarizer_free(s);
    return fb;
}

/* Acceptance: two summarizers with different options in one process give different feedback. */
static void test_two_plugins_in_one_process(void **state) {
    (void)state;
    pk_summarizer *terse, *verbose;
    char *t = feedback_with("terse", 5000, SAMPLE_COMPILE_ERROR, &terse);
    char *v = feedback_with("verbose", 5000, SAMPLE_COMPILE_ERROR, &verbose);
    char *b = builtin_feedback(SAMPLE_COMPILE_ERROR);
    assert_string_equal(t,
                        "compile_error: candidate.cu(14): error: identifier \"tile\" is undefined");
    assert_int_equal(strncmp(v, b, strlen(b)), 0); /* verbose = built-in + details */
    assert_true(strlen(v) > strlen(b));
    assert_string_not_equal(t, v);
    assert_int_equal(pk_summarizer_hook_fallbacks(terse), 0);
    assert_int_equal(pk_summarizer_hook_fallbacks(verbose), 0);
    free(t);
    free(v);
    free(b);

    pk_eval_result r;
    sample_fill(&r, SAMPLE_INCORRECT);
    v = pk_summarizer_feedback(verbose, &r, NULL);
    t = pk_summarizer_feedback(terse, &r, NULL);
    assert_non_null(strstr(v, "Trials: trial 1 passed"));
    assert_non_null(strstr(v, "trial 2 FAILED (max abs 0.75"));
    assert_string_equal(t, "incorrect: trial 1: 2 rank(s) wrong; rank 2 out[4097]: expected 1.5, "
                           "got 0.75 (max abs err 0.75)");
    free(t);
    free(v);
    sample_fill(&r, SAMPLE_CORRECT);
    t = pk_summarizer_feedback(terse, &r, NULL);
    assert_string_equal(t, "correct: 812.4 us vs baseline 1000.2 us (1.23x)");
    free(t);
    pk_summarizer_free(terse);
    pk_summarizer_free(verbose);
}

static void test_summarize_plugin(void **state) {
    (void)state;
    pk_summarizer *s = make(hook_options("summarize", "terse", 5000));
    pk_parsed_action a;
    assert_int_equal(pk_summarizer_parse_action(s, "```cuda\nint x;\n```\nFirst idea. Second idea.",
                                                NULL, &a, NULL),
                     PK_OK);
    assert_string_equal(a.summary, "First idea.");
    pk_parsed_action_free(&a);
    pk_summarizer_free(s);

    s = make(hook_options("summarize", "verbose", 5000));
    assert_int_equal(
        pk_summarizer_parse_action(s, "```cuda\nint x;\nint y;\n```\nIdea.", NULL, &a, NULL),
        PK_OK);
    assert_string_equal(a.summary, "Idea. (code: 2 lines)");
    pk_parsed_action_free(&a);
    pk_summarizer_free(s);
}

/* A plugin without a history hook declines: the built-in is used and nothing failed. */
static void test_declined_hook_is_not_a_failure(void **state) {
    (void)state;
    pk_summarizer *s = make(hook_options("history", "terse", 5000));
    pk_turn v = {.turn = 1, .code = "int x;", .summary = "sum", .feedback = "fb"};
    char *p = pk_summarizer_next_prompt(s, "TASK", &v, 1);
    assert_non_null(strstr(p, "--- Attempt 1 ---"));
    assert_int_equal(pk_summarizer_hook_fallbacks(s), 0);
    free(p);
    pk_summarizer_free(s);
}

/* Each faulty hook: the built-in text, a recorded failure naming the cause, quickly. */
static void expect_fallback(const char *use, int timeout_ms, const char *cause) {
    char *builtin = builtin_feedback(SAMPLE_RUNTIME_ERROR);
    pk_summarizer *s;
    double t0 = pk_now_ms();
    char *fb = feedback_with(use, timeout_ms, SAMPLE_RUNTIME_ERROR, &s);
    double took = pk_now_ms() - t0;
    assert_string_equal(fb, builtin);
    assert_int_equal(pk_summarizer_hook_fallbacks(s), 1);
    if (!strstr(pk_summarizer_last_hook_error(s), cause)) {
        fail_msg("hook error \"%s\" does not mention \"%s\"", pk_summarizer_last_hook_error(s),
                 cause);
    }
    assert_true(took < timeout_ms + 3000.0);
    free(fb);
    free(builtin);
    pk_summarizer_free(s);
}

static void test_plugin_crash(void **state) {
    (void)state;
    expect_fallback("crash", 5000, "SIGSEGV");
}

static void test_plugin_hang(void **state) {
    (void)state;
    double t0 = pk_now_ms();
    expect_fallback("hang", 300, "time limit");
    assert_true(pk_now_ms() - t0 >= 300.0);
}

static void test_plugin_bad_utf8(void **state) {
    (void)state;
    expect_fallback("bad_utf8", 5000, "not valid UTF-8");
}

static void test_plugin_wrong_abi(void **state) {
    (void)state;
    expect_fallback("abi", 5000, "ABI version 2");
}

/* A registered file that disappears later: the sandbox cannot show it, the built-in is used. */
static void test_hook_file_gone(void **state) {
    (void)state;
    char dir[] = "/tmp/pk-hook-gone-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256], spec[300];
    snprintf(path, sizeof path, "%s/terse.so", dir);
    char *data = NULL;
    size_t len = 0;
    assert_int_equal(pk_read_file(PK_TEST_TERSE, &data, &len, NULL), PK_OK);
    assert_int_equal(pk_write_file(path, data, len, NULL), PK_OK);
    free(data);
    snprintf(spec, sizeof spec, "plugin:%s", path);
    pk_error err = {0};
    assert_int_equal(pk_hook_registry_add(registry, "gone", spec, &err), PK_OK);
    unlink(path);
    rmdir(dir);
    expect_fallback("gone", 5000, "could not be started in the sandbox");
}

/* The operator's registry checks names and files when the server starts. */
static void expect_registry_error(const char *name, const char *spec, const char *needle) {
    pk_error err = {0};
    assert_int_equal(pk_hook_registry_add(registry, name, spec, &err), PK_ERR_INVALID);
    if (!strstr(err.message, needle))
        fail_msg("error \"%s\" does not mention \"%s\"", err.message, needle);
}

static void test_registry_errors(void **state) {
    (void)state;
    expect_registry_error("missing", "plugin:/nonexistent/plugin.so", "not a regular file");
    expect_registry_error("missing", "cmd:/nonexistent/prog", "not a regular file");
    expect_registry_error("rel", "plugin:relative.so", "absolute");
    expect_registry_error("py", "python:/x.py", "is not");
    expect_registry_error("terse", "plugin:" PK_TEST_VERBOSE, "registered twice");
    expect_registry_error("builtin", "plugin:" PK_TEST_VERBOSE, "hook name");
    expect_registry_error("a/b", "plugin:" PK_TEST_VERBOSE, "hook name");
    expect_registry_error("", "plugin:" PK_TEST_VERBOSE, "hook name");
    expect_registry_error("not_exec", "cmd:" PK_TEST_FIXTURES "/faulty_plugin.c", "not executable");
    pk_error err = {0};
    assert_int_equal(pk_hook_registry_add_arg(registry, "noequals", &err), PK_ERR_INVALID);
    assert_int_equal(pk_hook_registry_add_arg(registry, "terse2=plugin:" PK_TEST_TERSE, &err),
                     PK_OK);
    assert_string_equal(pk_hook_registry_spec(registry, "terse2"), "plugin:" PK_TEST_TERSE);
    assert_int_equal(
        pk_hook_registry_add_json(registry, "{\"v2\": \"plugin:" PK_TEST_VERBOSE "\"}", &err),
        PK_OK);
    assert_string_equal(pk_hook_registry_spec(registry, "v2"), "plugin:" PK_TEST_VERBOSE);
    assert_int_equal(pk_hook_registry_add_json(registry, "{\"v3\": 1}", &err), PK_ERR_INVALID);
    assert_int_equal(pk_hook_registry_add_json(registry, "[]", &err), PK_ERR_INVALID);
}

/* The control behind the attack: options name a registered hook and nothing else. A
 * path is refused even when it is the very file a name stands for. */
static void expect_refused(const pk_hook_registry *reg, const char *options, const char *needle) {
    pk_summarizer *s = NULL;
    pk_error err = {0};
    assert_int_equal(pk_summarizer_create_with_hooks(options, reg, NULL, &s, &err), PK_ERR_INVALID);
    assert_null(s);
    if (!strstr(err.message, needle))
        fail_msg("error \"%s\" does not mention \"%s\"", err.message, needle);
}

static void test_hooks_by_name_only(void **state) {
    (void)state;
    expect_refused(registry, "{\"hooks\": {\"feedback\": \"plugin:" PK_TEST_TERSE "\"}}",
                   "is not a registered hook name");
    expect_refused(registry, "{\"hooks\": {\"history\": \"cmd:/bin/sh\"}}", "pkgym serve --hook");
    expect_refused(registry, "{\"hooks\": {\"summarize\": {\"use\": \"/bin/sh\"}}}",
                   "is not a registered hook name");
    expect_refused(registry, "{\"hooks\": {\"feedback\": \"nosuchhook\"}}",
                   "no hook named \"nosuchhook\"");
    expect_refused(registry,
                   "{\"hook_registry\": {\"x\": \"cmd:/bin/sh\"}, \"hooks\": {\"feedback\": "
                   "\"x\"}}",
                   "hook_registry");
    /* Without a registry there is nothing but the built-in. */
    expect_refused(NULL, "{\"hooks\": {\"feedback\": \"terse\"}}", "none is registered");
}

static void test_command_hang_crash_garbage(void **state) {
    (void)state;
    expect_fallback("cmd_hang", 300, "time limit");
    expect_fallback("cmd_crash", 5000, "SIGSEGV");
    expect_fallback("cmd_garbage", 5000, "Feedback: looks fine");
}

/* Hooks run in the sandbox. A plugin's constructor (what a hostile object runs at dlopen)
 * cannot write on the host. */
static void test_plugin_constructor_stays_in_sandbox(void **state) {
    (void)state;
    mkdir(PK_ESCAPE_DIR, 0755);
    pk_summarizer *s;
    char *fb = feedback_with("escape", 5000, SAMPLE_COMPILE_ERROR, &s);
    assert_string_equal(fb, "faulty plugin text"); /* it was loaded and called */
    DIR *d = opendir(PK_ESCAPE_DIR);
    assert_non_null(d);
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] != '.')
            fail_msg("the plugin's constructor wrote %s/%s on the host", PK_ESCAPE_DIR, e->d_name);
    }
    closedir(d);
    free(fb);
    pk_summarizer_free(s);
}

/* Writes an executable script into dir and registers it as name. */
static void register_script(const char *dir, const char *name, const char *text) {
    char path[512], spec[600];
    snprintf(path, sizeof path, "%s/%s.sh", dir, name);
    assert_int_equal(pk_write_file(path, text, strlen(text), NULL), PK_OK);
    chmod(path, 0755);
    snprintf(spec, sizeof spec, "cmd:%s", path);
    pk_error err = {0};
    if (pk_hook_registry_add(registry, name, spec, &err) != PK_OK)
        fail_msg("%s", err.message);
}

/* A command hook tries to write next to itself, read a secret next to itself and connect to a
 * port the test listens on, on the host's loopback: none of it reaches the host. */
static void test_command_cannot_reach_host(void **state) {
    (void)state;
    char dir[] = PK_ESCAPE_DIR "-probe-XXXXXX";
    assert_non_null(mkdtemp(dir));
    int lsock = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof addr;
    assert_int_equal(bind(lsock, (struct sockaddr *)&addr, sizeof addr), 0);
    assert_int_equal(listen(lsock, 4), 0);
    assert_int_equal(getsockname(lsock, (struct sockaddr *)&addr, &alen), 0);
    char secret[600];
    snprintf(secret, sizeof secret, "%s/secret", dir);
    assert_int_equal(pk_write_file(secret, "s3cret", 6, NULL), PK_OK);
    char script[2048];
    snprintf(script, sizeof script,
             "#!/bin/bash\n"
             "cat >/dev/null\n"
             "if echo pwned > %s/marker 2>/dev/null; then w=wrote; else w=nowrite; fi\n"
             "if (exec 3<>/dev/tcp/127.0.0.1/%d) 2>/dev/null; then n=net; else n=nonet; fi\n"
             "if grep -q s3cret %s 2>/dev/null; then r=read; else r=noread; fi\n"
             "printf '{\"text\": \"%%s %%s %%s\"}' $w $n $r\n",
             dir, ntohs(addr.sin_port), secret);
    register_script(dir, "probe", script);
    pk_summarizer *s;
    char *fb = feedback_with("probe", 10000, SAMPLE_COMPILE_ERROR, &s);
    if (pk_summarizer_hook_fallbacks(s) != 0)
        fail_msg("the probe did not run: %s", pk_summarizer_last_hook_error(s));
    /* Under /tmp (CI clones live there) the hook's own path exists inside the sandbox's
     * private tmpfs, so a write there "works" and lands in that tmpfs: the host check below
     * decides. Elsewhere the path is read-only inside, and the write fails. */
    if (strncmp(dir, "/tmp/", 5) == 0)
        assert_true(strcmp(fb, "nowrite nonet noread") == 0 ||
                    strcmp(fb, "wrote nonet noread") == 0);
    else
        assert_string_equal(fb, "nowrite nonet noread");
    char marker[600];
    snprintf(marker, sizeof marker, "%s/marker", dir);
    assert_false(pk_path_exists(marker));            /* the host never sees the write */
    assert_int_equal(accept(lsock, NULL, NULL), -1); /* nobody connected */
    close(lsock);
    free(fb);
    pk_summarizer_free(s);
    char path[600];
    snprintf(path, sizeof path, "%s/probe.sh", dir);
    unlink(path);
    unlink(secret);
    rmdir(dir);
}

/* A hook that tries to hold 700 MiB goes over its memory limit: the built-in is used. */
static void test_command_memory_limit(void **state) {
    (void)state;
    char dir[] = "/tmp/pk-hook-mem-XXXXXX";
    assert_non_null(mkdtemp(dir));
    register_script(dir, "hog",
                    "#!/usr/bin/python3\n"
                    "import sys\n"
                    "sys.stdin.read()\n"
                    "b = b'x' * (700 << 20)\n"
                    "print('{\"text\": \"allocated %d\"}' % len(b))\n");
    char *builtin = builtin_feedback(SAMPLE_RUNTIME_ERROR);
    pk_summarizer *s;
    char *fb = feedback_with("hog", 20000, SAMPLE_RUNTIME_ERROR, &s);
    assert_string_equal(fb, builtin);
    assert_int_equal(pk_summarizer_hook_fallbacks(s), 1);
    printf("memory hog: %s\n", pk_summarizer_last_hook_error(s));
    free(fb);
    free(builtin);
    pk_summarizer_free(s);
    char path[600];
    snprintf(path, sizeof path, "%s/hog.sh", dir);
    unlink(path);
    rmdir(dir);
}

static void test_command_gets_hook_name(void **state) {
    (void)state;
    pk_summarizer *s;
    char *fb = feedback_with("cmd_echo", 5000, SAMPLE_TIMEOUT, &s);
    assert_string_equal(fb, "command ran for feedback");
    free(fb);
    pk_summarizer_free(s);
}

/* A feedback hook gets both rooflines, each by its name. */
static void test_command_gets_both_rooflines(void **state) {
    (void)state;
    pk_summarizer *s;
    char *fb = feedback_with("cmd_echo_timing", 5000, SAMPLE_CORRECT_ROOFLINE, &s);
    assert_non_null(strstr(fb, "roofline_floor_us=300 "));
    assert_non_null(strstr(fb, "roofline_no_overlap_us=406.2 "));
    assert_non_null(strstr(fb, "time_us=812.4"));
    free(fb);
    pk_summarizer_free(s);
}

/* A 1 MB request to a command that never reads it: no SIGPIPE kills this process. */
static void test_command_not_reading_large_request(void **state) {
    (void)state;
    pk_summarizer *s = make("{\"budget_tokens\": 0, \"hooks\": {\"history\": \"cmd_no_read\"}}");
    size_t n = 1 << 20;
    char *code = malloc(n + 1);
    memset(code, 'c', n);
    code[n] = '\0';
    pk_turn v = {.turn = 1, .code = code, .summary = "sum", .feedback = "fb"};
    char *p = pk_summarizer_next_prompt(s, "TASK", &v, 1);
    assert_non_null(strstr(p, "--- Attempt 1 ---"));
    assert_int_equal(pk_summarizer_hook_fallbacks(s), 1);
    assert_non_null(strstr(pk_summarizer_last_hook_error(s), "(nothing)"));
    free(p);
    free(code);
    pk_summarizer_free(s);
}

static void test_history_hook_over_budget(void **state) {
    (void)state;
    pk_summarizer *s =
        make("{\"budget_chars\": 4000, \"hooks\": {\"history\": \"cmd_over_budget\"}}");
    pk_turn v = {.turn = 1, .code = "int x;", .summary = "sum", .feedback = "fb"};
    char *p = pk_summarizer_next_prompt(s, "TASK", &v, 1);
    assert_true(strlen(p) <= 4000);
    assert_non_null(strstr(p, "--- Attempt 1 ---"));
    assert_non_null(strstr(pk_summarizer_last_hook_error(s), "exceeds the budget"));
    free(p);
    pk_summarizer_free(s);
}

/* The shipped example command: a compact history, within the budget. */
static void test_example_history_command(void **state) {
    (void)state;
    pk_summarizer *s = make("{\"budget_chars\": 1500, \"hooks\": {\"history\": "
                            "\"history_example\", \"timeout_ms\": 10000}}");
    char code[3][700];
    pk_turn v[3];
    for (int i = 0; i < 3; i++) {
        memset(code[i], 'a' + i, sizeof code[i] - 1);
        code[i][sizeof code[i] - 1] = '\0';
        v[i] = (pk_turn){.turn = i + 1, .code = code[i], .summary = "sum", .feedback = "fb"};
    }
    char *p = pk_summarizer_next_prompt(s, "TASK", v, 3);
    if (pk_summarizer_hook_fallbacks(s) != 0)
        fail_msg("example command failed: %s", pk_summarizer_last_hook_error(s));
    assert_non_null(strstr(p, "code shown for the latest only"));
    assert_non_null(strstr(p, "Attempt 1: fb"));
    assert_non_null(strstr(p, code[2]));
    assert_null(strstr(p, code[1]));
    assert_true(strlen(p) <= 1500);
    free(p);
    pk_summarizer_free(s);
}

static void expect_invalid(const char *options, const char *needle) {
    pk_summarizer *s = NULL;
    pk_error err = {0};
    assert_int_equal(pk_summarizer_create_with_hooks(options, registry, NULL, &s, &err),
                     PK_ERR_INVALID);
    assert_null(s);
    if (!strstr(err.message, needle))
        fail_msg("error \"%s\" does not mention \"%s\"", err.message, needle);
}

static void test_option_errors(void **state) {
    (void)state;
    expect_invalid("{\"budget_chars\": 100, \"verbosity\": 3}", "\"verbosity\"");
    expect_invalid("{\"hooks\": {\"render\": \"builtin\"}}", "\"render\"");
    expect_invalid("{\"hooks\": {\"feedback\": \"python:/x.py\"}}", "python:/x.py");
    expect_invalid("{\"hooks\": {\"feedback\": \"plugin:relative.so\"}}", "plugin:relative.so");
    expect_invalid("{\"hooks\": {\"feedback\": {\"use\": \"builtin\", \"retries\": 1}}}",
                   "\"retries\"");
    expect_invalid("{\"hooks\": {\"timeout_ms\": 0}}", "timeout_ms");
    expect_invalid("{\"budget_tokens\": -5}", "budget_tokens");
    expect_invalid("[1]", "object");
    expect_invalid("{\"budget_chars\": ", "invalid JSON");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_plugins_in_one_process),
        cmocka_unit_test(test_summarize_plugin),
        cmocka_unit_test(test_declined_hook_is_not_a_failure),
        cmocka_unit_test(test_plugin_crash),
        cmocka_unit_test(test_plugin_hang),
        cmocka_unit_test(test_plugin_bad_utf8),
        cmocka_unit_test(test_plugin_wrong_abi),
        cmocka_unit_test(test_hook_file_gone),
        cmocka_unit_test(test_registry_errors),
        cmocka_unit_test(test_hooks_by_name_only),
        cmocka_unit_test(test_command_hang_crash_garbage),
        cmocka_unit_test(test_plugin_constructor_stays_in_sandbox),
        cmocka_unit_test(test_command_cannot_reach_host),
        cmocka_unit_test(test_command_memory_limit),
        cmocka_unit_test(test_command_gets_hook_name),
        cmocka_unit_test(test_command_gets_both_rooflines),
        cmocka_unit_test(test_command_not_reading_large_request),
        cmocka_unit_test(test_history_hook_over_budget),
        cmocka_unit_test(test_example_history_command),
        cmocka_unit_test(test_option_errors),
    };
    return cmocka_run_group_tests(tests, setup_registry, teardown_registry);
}
