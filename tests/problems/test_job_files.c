/* A job's files are for the server's user only: the job directory (and the jobs root) 0700,
 * every file in it (source, compiled object, markers, what the sandboxed compile and run
 * wrote) without group or other permissions. They hold model-written code that the harness
 * loads: another local user must not read or swap it. And what the candidate leaves in its
 * work dir is read back without following links or blocking on FIFOs. */
#define _GNU_SOURCE
#include <dirent.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "pk_harness.h"
#include "selftest_scale.h"

static const char *correct_scale = SELFTEST_SCALE_CORRECT;

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

/* Issue 27, finding 7: the problems' solutions/ are out of every job sandbox's view. A candidate
 * that includes the reference solution by its absolute path compiled (and was scored correct)
 * while the sandbox showed the whole problems tree; now the file is not there, nor any other
 * problem's directory. */
static void test_solutions_hidden(void **state) {
    (void)state;
    pk_problem_set *set = NULL;
    pk_error err;
    assert_int_equal(pk_problem_set_load(PK_TEST_PROBLEMS, PK_TEST_MODULES, &set, &err), PK_OK);
    const pk_problem *scale = pk_problem_set_find(set, "selftest/scale");
    assert_non_null(scale);
    char base[] = "/tmp/pk-test-job-hide-XXXXXX", root[300];
    assert_non_null(mkdtemp(base));
    snprintf(root, sizeof root, "%s/jobs", base);
    pk_eval_opts o;
    pk_eval_opts_default(&o);
    o.work_root = root;
    o.skip_timing = 1;
    o.trials = 1;
    o.seed = 3;
    static const char *const srcs[] = {
        "#include \"" PK_TEST_PROBLEMS "/selftest/scale/solutions/correct.cu\"\n/* solution */\n",
        "#include \"" PK_TEST_PROBLEMS "/selftest/allgather/meta.json\"\n/* solution */\n"};
    for (size_t i = 0; i < sizeof srcs / sizeof *srcs; i++) {
        pk_eval_result res;
        pk_eval_result_init(&res);
        assert_int_equal(pk_harness_evaluate(scale, srcs[i], &o, &res, &err), PK_OK);
        printf("including %s: %s\n", i ? "another problem's file" : "the reference solution",
               pk_status_name(res.status));
        assert_int_equal(res.status, PK_STATUS_COMPILE_ERROR);
        assert_non_null(res.compile_log);
        assert_non_null(strstr(res.compile_log, "No such file"));
        pk_eval_result_free(&res);
    }
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    assert_int_equal(system(cmd), 0);
    pk_problem_set_free(set);
}

/* A jobs root that another user owns is refused: its owner could swap our jobs' files. As
 * root the test makes one (owned by nobody); as any other user, / is owned by someone else. */
static void test_foreign_jobs_root_refused(void **state) {
    (void)state;
    pk_problem_set *set = NULL;
    pk_error err;
    assert_int_equal(pk_problem_set_load(PK_TEST_PROBLEMS, PK_TEST_MODULES, &set, &err), PK_OK);
    const pk_problem *scale = pk_problem_set_find(set, "selftest/scale");
    char made[] = "/tmp/pk-test-job-foreign-XXXXXX";
    const char *root = "/";
    if (geteuid() == 0) {
        assert_non_null(mkdtemp(made));
        assert_int_equal(chown(made, 65534, 65534), 0);
        assert_int_equal(chmod(made, 0777), 0);
        root = made;
    }
    struct stat st;
    assert_int_equal(stat(root, &st), 0);
    assert_int_not_equal(st.st_uid, geteuid()); /* foreign, whoever runs the test */
    pk_eval_opts o;
    pk_eval_opts_default(&o);
    o.work_root = root;
    pk_eval_result res;
    pk_eval_result_init(&res);
    pk_job *job = NULL;
    assert_int_not_equal(pk_job_create(scale, correct_scale, &o, &job, &res, &err), PK_OK);
    assert_non_null(strstr(err.message, "not by us"));
    pk_eval_result_free(&res);
    if (root == made)
        rmdir(made);
    pk_problem_set_free(set);
}

/* A rank's progress marker becomes a symlink to a host file, or a FIFO, while its candidate
 * hangs: the harness reads the markers on the timeout path, and must neither show the host
 * file's contents in the verdict nor block. A candidate could only do this by getting past the
 * symbol checks and the raw-syscall scan (docs/sandbox.md: it shares the runner's address space,
 * so libc is reachable by computed addresses); the test plays that candidate from outside the
 * sandbox, replacing the marker as soon as rank 0 is inside the hanging candidate. */
static const char *hanging_candidate =
    "#include \"pk_ctx.h\"\n"
    "extern \"C\" int solution(const pk_ctx *ctx, const float *x, float *y, size_t n) {\n"
    "    for (volatile long i = 0;; i++) {\n"
    "    }\n"
    "    return 0;\n"
    "}\n";

typedef struct swap_args {
    const char *root, *secret;
    int fifo;
    volatile int done; /* set by either thread; a test's poll loop needs no stronger ordering */
} swap_args;

/* Waits for rank0.progress of the job under root to say "candidate", then replaces it. */
static void *swap_marker(void *arg) {
    swap_args *a = arg;
    for (int tries = 0; tries < 4000 && !a->done; tries++) {
        DIR *d = opendir(a->root);
        struct dirent *e;
        while (d && (e = readdir(d))) {
            if (strncmp(e->d_name, "job-", 4) != 0)
                continue;
            char path[700], buf[32] = "";
            snprintf(path, sizeof path, "%s/%s/rank0.progress", a->root, e->d_name);
            FILE *f = fopen(path, "r");
            if (f) {
                if (!fgets(buf, sizeof buf, f))
                    buf[0] = 0;
                fclose(f);
            }
            if (strncmp(buf, "candidate", 9) == 0) {
                unlink(path);
                int rc = a->fifo ? mkfifo(path, 0600) : symlink(a->secret, path);
                a->done = rc == 0 ? 1 : -1;
            }
        }
        if (d)
            closedir(d);
        usleep(5000);
    }
    return NULL;
}

static void test_markers_never_followed(void **state) {
    (void)state;
    pk_problem_set *set = NULL;
    pk_error err;
    assert_int_equal(pk_problem_set_load(PK_TEST_PROBLEMS, PK_TEST_MODULES, &set, &err), PK_OK);
    const pk_problem *scale = pk_problem_set_find(set, "selftest/scale");
    char base[] = "/tmp/pk-test-job-markers-XXXXXX", secret[300], root[300];
    assert_non_null(mkdtemp(base));
    snprintf(secret, sizeof secret, "%s/secret", base);
    snprintf(root, sizeof root, "%s/jobs", base);
    assert_int_equal(pk_write_file_private(secret, "TOPSECRET-host-file 2", 21, &err), PK_OK);
    for (int fifo = 0; fifo <= 1; fifo++) {
        pk_eval_opts o;
        pk_eval_opts_default(&o);
        o.work_root = root;
        o.skip_timing = 1;
        o.trials = 1;
        o.run_timeout_ms = 3000;
        pk_eval_result res;
        pk_eval_result_init(&res);
        swap_args sw = {root, secret, fifo, 0};
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, swap_marker, &sw), 0);
        double t0 = pk_now_ms();
        assert_int_equal(pk_harness_evaluate(scale, hanging_candidate, &o, &res, &err), PK_OK);
        double took = pk_now_ms() - t0;
        sw.done = sw.done ? sw.done : 2; /* stops the thread if it never swapped */
        pthread_join(th, NULL);
        printf("%s: %s: %s (%.0f ms)\n", fifo ? "fifo" : "symlink", pk_status_name(res.status),
               res.reason, took);
        assert_int_equal(sw.done, 1); /* the marker was replaced while the rank hung */
        assert_int_equal(res.status, PK_STATUS_TIMEOUT);
        if (strstr(res.reason, "TOPSECRET"))
            fail_msg("the verdict shows the host file: %s", res.reason);
        assert_true(took < 60000);
        pk_eval_result_free(&res);
    }
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    assert_int_equal(system(cmd), 0);
    pk_problem_set_free(set);
}

/* Issue 27, finding 8: job directories that a dead process left (model code in them) are
 * removed; a live owner's, a kept one's, links and other names are not; nor anything in a
 * root that is not private. */
static void test_reap_orphans(void **state) {
    (void)state;
    char base[] = "/tmp/pk-test-reap-XXXXXX", root[300], path[700];
    assert_non_null(mkdtemp(base));
    snprintf(root, sizeof root, "%s/jobs", base);
    assert_int_equal(mkdir(root, 0700), 0);
    pid_t dead = fork();
    if (dead == 0)
        _exit(0);
    assert_true(dead > 0);
    assert_int_equal(waitpid(dead, NULL, 0), dead); /* reaped: its PID names no process */
    const char *dirs[] = {"job-%d-1-0000000a", "job-%d-2-0000000b", "job-%d-3-0000000c"};
    for (int i = 0; i < 3; i++) {
        char name[64];
        snprintf(name, sizeof name, dirs[i], i == 2 ? (int)getpid() : (int)dead);
        snprintf(path, sizeof path, "%s/%s", root, name);
        assert_int_equal(mkdir(path, 0700), 0);
        snprintf(path, sizeof path, "%s/%s/candidate.cu", root, name);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fclose(f);
    }
    snprintf(path, sizeof path, "%s/job-%d-2-0000000b/.keep", root, (int)dead);
    fclose(fopen(path, "w"));
    snprintf(path, sizeof path, "%s/job-%d-4-0000000d", root, (int)dead);
    assert_int_equal(symlink(base, path), 0);
    snprintf(path, sizeof path, "%s/job-%d-5-0000000e-extra", root, (int)dead);
    assert_int_equal(mkdir(path, 0700), 0);

    assert_int_equal(chmod(root, 0755), 0); /* not private: nothing is touched */
    assert_int_equal(pk_job_reap_orphans(root), 0);
    assert_int_equal(chmod(root, 0700), 0);
    assert_int_equal(pk_job_reap_orphans(root), 1);
    snprintf(path, sizeof path, "%s/job-%d-1-0000000a", root, (int)dead);
    assert_int_not_equal(access(path, F_OK), 0); /* the dead process's: gone */
    const char *kept[] = {"job-%d-2-0000000b", "job-%d-4-0000000d", "job-%d-5-0000000e-extra"};
    for (int i = 0; i < 3; i++) {
        char name[64];
        snprintf(name, sizeof name, kept[i], (int)dead);
        snprintf(path, sizeof path, "%s/%s", root, name);
        struct stat st;
        if (lstat(path, &st) != 0)
            fail_msg("%s was removed", name);
    }
    snprintf(path, sizeof path, "%s/job-%d-3-0000000c", root, (int)getpid());
    assert_int_equal(access(path, F_OK), 0); /* this live process's */
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    assert_int_equal(system(cmd), 0);
}

/* Jobs in two roots, alternately: each root's owner lock is taken once (a second lock of the
 * same file through another descriptor would wait for ever), and a reaper leaves them. */
static void test_owner_lock_per_root(void **state) {
    (void)state;
    pk_problem_set *set = NULL;
    pk_error err;
    assert_int_equal(pk_problem_set_load(PK_TEST_PROBLEMS, PK_TEST_MODULES, &set, &err), PK_OK);
    const pk_problem *scale = pk_problem_set_find(set, "selftest/scale");
    assert_non_null(scale);
    char base[] = "/tmp/pk-test-owner-XXXXXX", roots[2][64], path[160];
    assert_non_null(mkdtemp(base));
    for (int r = 0; r < 2; r++)
        snprintf(roots[r], sizeof roots[r], "%s/jobs%d", base, r);
    pk_job *kept[3];
    for (int i = 0; i < 3; i++) {
        pk_eval_opts o;
        pk_eval_opts_default(&o);
        o.work_root = roots[i % 2];
        pk_eval_result res;
        pk_eval_result_init(&res);
        assert_int_equal(pk_job_create(scale, correct_scale, &o, &kept[i], &res, &err), PK_OK);
        pk_eval_result_free(&res);
    }
    for (int r = 0; r < 2; r++) {
        snprintf(path, sizeof path, "%s/job-%d.owner", roots[r], (int)getpid());
        assert_int_equal(access(path, F_OK), 0);
        assert_int_equal(pk_job_reap_orphans(roots[r]), 0); /* ours, alive */
    }
    for (int i = 0; i < 3; i++)
        pk_job_free(kept[i]);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    assert_int_equal(system(cmd), 0);
    pk_problem_set_free(set);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_job_files_private),
        cmocka_unit_test(test_reap_orphans),
        cmocka_unit_test(test_owner_lock_per_root),
        cmocka_unit_test(test_foreign_jobs_root_refused),
        cmocka_unit_test(test_markers_never_followed),
        cmocka_unit_test(test_solutions_hidden),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
