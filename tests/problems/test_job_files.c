/* A job's files are for the server's user only: the job directory (and the jobs root) 0700,
 * every file in it (source, compiled object, markers, what the sandboxed compile and run
 * wrote) without group or other permissions. They hold model-written code that the harness
 * loads: another local user must not read or swap it. And what the candidate leaves in its
 * work dir is read back without following links or blocking on FIFOs. */
#define _GNU_SOURCE
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "pk_harness.h"

static const char *correct_scale =
    "#include \"pk_ctx.h\"\n"
    "extern \"C\" int solution(const pk_ctx *ctx, const float *x, float *y, size_t n) {\n"
    "    for (size_t i = 0; i < n; i++)\n"
    "        y[i] = 3.0f * x[i] + (float)ctx->rank;\n"
    "    return 0;\n"
    "}\n";

static unsigned mode_of(const char *path) {
    struct stat st;
    assert_int_equal(lstat(path, &st), 0);
    return (unsigned)(st.st_mode & 07777);
}

/* Every entry below dir: directories 0700, files without group/other bits. Returns the count. */
static int check_tree(const char *dir) {
    assert_int_equal(mode_of(dir), 0700);
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        assert_int_equal(lstat(path, &st), 0);
        if (S_ISDIR(st.st_mode)) {
            n += check_tree(path);
        } else if (st.st_mode & 077) {
            fail_msg("%s has mode %03o: group or others can reach it", path,
                     (unsigned)(st.st_mode & 0777));
        } else {
            n++;
        }
    }
    closedir(d);
    return n;
}

static void test_job_files_private(void **state) {
    (void)state;
    pk_problem_set *set = NULL;
    pk_error err;
    assert_int_equal(pk_problem_set_load(PK_TEST_PROBLEMS, PK_TEST_MODULES, &set, &err), PK_OK);
    const pk_problem *scale = pk_problem_set_find(set, "selftest/scale");
    assert_non_null(scale);
    char base[] = "/tmp/pk-test-job-files-XXXXXX", root[300];
    assert_non_null(mkdtemp(base));
    snprintf(root, sizeof root, "%s/jobs", base);

    pk_eval_opts o;
    pk_eval_opts_default(&o);
    o.work_root = root;
    o.skip_timing = 1;
    o.trials = 1;
    o.seed = 3;
    o.keep_workdir = 1;
    pk_eval_result res;
    pk_eval_result_init(&res);
    pk_job *job = NULL;
    assert_int_equal(pk_job_create(scale, correct_scale, &o, &job, &res, &err), PK_OK);
    assert_int_equal(pk_job_warm(job, NULL, 0, &err), PK_OK); /* the go marker too */
    assert_int_equal(pk_job_compile(job, &res, &err), PK_OK);
    assert_non_null(pk_job_object_path(job));
    char object[600], dir[600];
    snprintf(object, sizeof object, "%s", pk_job_object_path(job));
    snprintf(dir, sizeof dir, "%s", object);
    *strrchr(dir, '/') = '\0';
    assert_int_equal(pk_job_run(job, NULL, 0, &res, &err), PK_OK);
    assert_int_equal(res.status, PK_STATUS_CORRECT);

    assert_int_equal(mode_of(root), 0700);
    assert_int_equal(mode_of(object), 0600);
    int files = check_tree(dir);
    printf("job dir %s: %d files, all private\n", dir, files);
    assert_true(files >= 4); /* source, object, result, go marker at least */
    pk_job_free(job);
    pk_eval_result_free(&res);

    /* A cached object copied into a job: private as well. */
    pk_eval_result_init(&res);
    assert_int_equal(pk_job_create(scale, correct_scale, &o, &job, &res, &err), PK_OK);
    char copy[700];
    snprintf(copy, sizeof copy, "%s.cached", object);
    char *data = NULL;
    size_t len = 0;
    assert_int_equal(pk_read_file(object, &data, &len, &err), PK_OK);
    assert_int_equal(pk_write_file(copy, data, len, &err), PK_OK);
    free(data);
    assert_int_equal(pk_job_use_object(job, copy, &res, &err), PK_OK);
    assert_int_equal(mode_of(pk_job_object_path(job)), 0600);
    pk_job_free(job);
    pk_eval_result_free(&res);

    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    assert_int_equal(system(cmd), 0);
    pk_problem_set_free(set);
}

/* A jobs root that another user owns is refused: its owner could swap our jobs' files. */
static void test_foreign_jobs_root_refused(void **state) {
    (void)state;
    if (geteuid() != 0) {
        skip(); /* only root can make a directory owned by someone else */
    }
    pk_problem_set *set = NULL;
    pk_error err;
    assert_int_equal(pk_problem_set_load(PK_TEST_PROBLEMS, PK_TEST_MODULES, &set, &err), PK_OK);
    const pk_problem *scale = pk_problem_set_find(set, "selftest/scale");
    char root[] = "/tmp/pk-test-job-foreign-XXXXXX";
    assert_non_null(mkdtemp(root));
    assert_int_equal(chown(root, 65534, 65534), 0);
    assert_int_equal(chmod(root, 0777), 0);
    pk_eval_opts o;
    pk_eval_opts_default(&o);
    o.work_root = root;
    pk_eval_result res;
    pk_eval_result_init(&res);
    pk_job *job = NULL;
    assert_int_not_equal(pk_job_create(scale, correct_scale, &o, &job, &res, &err), PK_OK);
    assert_non_null(strstr(err.message, "not by us"));
    pk_eval_result_free(&res);
    rmdir(root);
    pk_problem_set_free(set);
}

/* A candidate replaces its ranks' progress markers with a symlink to a host file, or a FIFO, and
 * hangs: the harness reads the markers on the timeout path, and must neither show the host
 * file's contents in the verdict nor block. Raw system calls pass the symbol checks. */
static const char *hostile_markers =
    "#include \"pk_ctx.h\"\n"
    "static long raw3(long n, long a, long b, long c) {\n"
    "    long r;\n"
    "    __asm__ volatile(\"syscall\" : \"=a\"(r) : \"a\"(n), \"D\"(a), \"S\"(b), \"d\"(c)\n"
    "                     : \"rcx\", \"r11\", \"memory\");\n"
    "    return r;\n"
    "}\n"
    "extern \"C\" int solution(const pk_ctx *ctx, const float *x, float *y, size_t n) {\n"
    "    static const char target[] = \"%s\";\n"
    "    static char marker[] = \"rank0.progress\";\n"
    "    marker[4] = (char)('0' + ctx->rank);\n"
    "    raw3(87 /* unlink */, (long)marker, 0, 0);\n"
    "    if (%d)\n"
    "        raw3(133 /* mknod */, (long)marker, 0010600 /* S_IFIFO|0600 */, 0);\n"
    "    else\n"
    "        raw3(88 /* symlink */, (long)target, (long)marker, 0);\n"
    "    for (volatile long i = 0;; i++) {\n"
    "    }\n"
    "    return 0;\n"
    "}\n";

static void test_markers_never_followed(void **state) {
    (void)state;
    pk_problem_set *set = NULL;
    pk_error err;
    assert_int_equal(pk_problem_set_load(PK_TEST_PROBLEMS, PK_TEST_MODULES, &set, &err), PK_OK);
    const pk_problem *scale = pk_problem_set_find(set, "selftest/scale");
    char base[] = "/tmp/pk-test-job-markers-XXXXXX", secret[300], root[300], source[4096];
    assert_non_null(mkdtemp(base));
    snprintf(secret, sizeof secret, "%s/secret", base);
    snprintf(root, sizeof root, "%s/jobs", base);
    assert_int_equal(pk_write_file_private(secret, "TOPSECRET-host-file 2", 21, &err), PK_OK);
    for (int fifo = 0; fifo <= 1; fifo++) {
        snprintf(source, sizeof source, hostile_markers, secret, fifo);
        pk_eval_opts o;
        pk_eval_opts_default(&o);
        o.work_root = root;
        o.skip_timing = 1;
        o.trials = 1;
        o.run_timeout_ms = 3000;
        pk_eval_result res;
        pk_eval_result_init(&res);
        double t0 = pk_now_ms();
        assert_int_equal(pk_harness_evaluate(scale, source, &o, &res, &err), PK_OK);
        printf("%s: %s: %s (%.0f ms)\n", fifo ? "fifo" : "symlink", pk_status_name(res.status),
               res.reason, pk_now_ms() - t0);
        assert_int_equal(res.status, PK_STATUS_TIMEOUT);
        if (strstr(res.reason, "TOPSECRET"))
            fail_msg("the verdict shows the host file: %s", res.reason);
        assert_true(pk_now_ms() - t0 < 60000);
        pk_eval_result_free(&res);
    }
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    assert_int_equal(system(cmd), 0);
    pk_problem_set_free(set);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_job_files_private),
        cmocka_unit_test(test_foreign_jobs_root_refused),
        cmocka_unit_test(test_markers_never_followed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
