/* Compile cache (hit, miss, a changed key misses, bad keys) and baseline cache (hit; a
 * change of problem sizes, world size, GPU model, driver or NCCL misses; corrupt entries;
 * entries too noisy, too old or of the first format are stale). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "pk_baseline_cache.h"
#include "pk_compile_cache.h"
#include "pk_host_info.h"
#include "pk_key_gate.h"

static char root[256];

static int make_root(void **state) {
    snprintf(root, sizeof root, "/tmp/pk-test-caches-XXXXXX");
    return mkdtemp(root) ? 0 : -1;
}

static int remove_root(void **state) {
    pk_rm_rf(root);
    return 0;
}

static void key_of(const char *source, const char *flags, char out[65]) {
    char buf[512];
    int n = snprintf(buf, sizeof buf, "%s\n%s", source, flags);
    pk_sha256_hex(buf, (size_t)n, out);
}

static void test_compile_cache(void **state) {
    pk_compile_cache *c;
    pk_error err;
    assert_int_equal(pk_compile_cache_open(root, &c, &err), PK_OK);
    char obj[512], key[65], key_flags[65];
    snprintf(obj, sizeof obj, "%s/candidate.so", root);
    static const char bytes[] = "\x7f"
                                "ELF object bytes";
    assert_int_equal(pk_write_file(obj, bytes, sizeof bytes - 1, &err), PK_OK);
    key_of("__global__ void k() {}", "-O2 -arch=sm_90a", key);
    key_of("__global__ void k() {}", "-O3 -arch=sm_90a", key_flags);

    assert_null(pk_compile_cache_lookup(c, key)); /* miss */
    assert_int_equal(pk_compile_cache_store(c, key, obj, &err), PK_OK);
    char *hit = pk_compile_cache_lookup(c, key); /* hit, same bytes */
    assert_non_null(hit);
    char *data = NULL;
    size_t len = 0;
    assert_int_equal(pk_read_file(hit, &data, &len, &err), PK_OK);
    assert_int_equal(len, sizeof bytes - 1);
    assert_memory_equal(data, bytes, sizeof bytes - 1);
    free(data);
    free(hit);
    assert_null(pk_compile_cache_lookup(c, key_flags)); /* other flags: another key, a miss */

    /* Keys that are not SHA-256 hex never reach the file system. */
    assert_null(pk_compile_cache_lookup(c, "../../etc/passwd"));
    assert_int_equal(pk_compile_cache_store(c, "../x", obj, &err), PK_ERR_INVALID);
    /* A missing object is an error, not a poisoned entry. */
    char gone[512];
    snprintf(gone, sizeof gone, "%s/missing.so", root);
    assert_int_equal(pk_compile_cache_store(c, key_flags, gone, &err), PK_ERR_NOT_FOUND);
    assert_null(pk_compile_cache_lookup(c, key_flags));
    pk_compile_cache_close(c);
}

static unsigned mode_of(const char *path) {
    struct stat st;
    assert_int_equal(lstat(path, &st), 0);
    return (unsigned)(st.st_mode & 07777);
}

/* Cached objects are model-written code the harness loads: 0600 in 0700 directories, even
 * under a cache root that was made group- and world-readable, and whatever the umask. */
static void test_compile_cache_private(void **state) {
    char base[300], obj[400], key[65];
    snprintf(base, sizeof base, "%s/private", root);
    assert_int_equal(mkdir(base, 0755), 0);
    chmod(base, 0755);
    mode_t old = umask(0);
    pk_compile_cache *c;
    pk_error err;
    assert_int_equal(pk_compile_cache_open(base, &c, &err), PK_OK);
    snprintf(obj, sizeof obj, "%s/obj.so", root);
    assert_int_equal(pk_write_file(obj,
                                   "\x7f"
                                   "ELF",
                                   4, &err),
                     PK_OK);
    key_of("private", "-O3", key);
    assert_int_equal(pk_compile_cache_store(c, key, obj, &err), PK_OK);
    char *hit = pk_compile_cache_lookup(c, key);
    assert_non_null(hit);
    assert_int_equal(mode_of(hit), 0600);
    *strrchr(hit, '/') = '\0';
    assert_int_equal(mode_of(hit), 0700); /* <root>/compile/<xx> */
    *strrchr(hit, '/') = '\0';
    assert_int_equal(mode_of(hit), 0700); /* <root>/compile */
    assert_int_equal(mode_of(base), 0700);
    free(hit);
    pk_compile_cache_close(c);
    char *dir = NULL;
    assert_int_equal(pk_baseline_cache_open(base, &dir, &err), PK_OK);
    assert_int_equal(mode_of(dir), 0700);
    pk_baseline_key k = {.problem_id = "p",
                         .meta_json = "{}",
                         .world_size = 2,
                         .device = "d",
                         .driver = "1",
                         .nccl = "2"};
    pk_baseline_entry e = {12.5, 0.01, 100, 1.7e9};
    assert_int_equal(pk_baseline_cache_store(dir, &k, &e, &err), PK_OK);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "test -z \"$(find '%s' -type f -perm /077)\"", dir);
    assert_int_equal(system(cmd), 0); /* no entry readable by group or others */
    free(dir);
    umask(old);
}

static void test_baseline_cache(void **state) {
    char *dir = NULL;
    pk_error err;
    assert_int_equal(pk_baseline_cache_open(root, &dir, &err), PK_OK);
    pk_baseline_key k = {.problem_id = "collectives/allreduce",
                         .meta_json = "{\"dims\":{\"n\":1048576}}",
                         .world_size = 2,
                         .device = "NVIDIA H200",
                         .driver = "580.159",
                         .nccl = "22803"};
    pk_baseline_entry got = {0};
    pk_baseline_entry e = {.us = 123.25, .cv = 0.0125, .iters = 100, .measured_at = 1.7e9 + 0.5};
    assert_int_equal(pk_baseline_cache_lookup(dir, &k, &got), 0);
    assert_int_equal(pk_baseline_cache_store(dir, &k, &e, &err), PK_OK);
    assert_int_equal(pk_baseline_cache_lookup(dir, &k, &got), 1);
    /* The entry keeps the measurement's CV, repetitions and time, exactly. */
    assert_true(got.us == 123.25 && got.cv == 0.0125 && got.iters == 100 &&
                got.measured_at == 1.7e9 + 0.5);

    pk_baseline_key v[5];
    for (int i = 0; i < 5; i++)
        v[i] = k;
    v[0].meta_json = "{\"dims\":{\"n\":2097152}}"; /* other sizes */
    v[1].world_size = 4;
    v[2].device = "NVIDIA H100 80GB HBM3";
    v[3].driver = "580.160";
    v[4].nccl = "22809";
    for (int i = 0; i < 5; i++)
        assert_int_equal(pk_baseline_cache_lookup(dir, &v[i], &got), 0);

    pk_baseline_entry zero = {0};
    assert_int_equal(pk_baseline_cache_store(dir, &k, &zero, &err), PK_ERR_INVALID);
    e.us = 99.5; /* re-measured */
    assert_int_equal(pk_baseline_cache_store(dir, &k, &e, &err), PK_OK);
    assert_int_equal(pk_baseline_cache_lookup(dir, &k, &got), 1);
    assert_true(got.us == 99.5);
    free(dir);
}

/* A cached baseline is measured again when its CV is high, when it is too old, or when it
 * lacks those facts (an entry of the first format, "key\n<us>\n"). */
static void test_baseline_staleness(void **state) {
    char why[160];
    double now = 1.8e9;
    pk_baseline_entry fresh = {.us = 50, .cv = 0.02, .iters = 100, .measured_at = now - 60};
    assert_null(pk_baseline_stale(&fresh, now, 0.1, 3600, why, sizeof why));
    assert_null(pk_baseline_stale(&fresh, now, 0, 0, why, sizeof why)); /* the defaults */

    pk_baseline_entry noisy = fresh;
    noisy.cv = 0.25;
    assert_non_null(pk_baseline_stale(&noisy, now, 0.1, 3600, why, sizeof why));
    assert_non_null(strstr(why, "CV 0.250 is above 0.100"));
    assert_non_null(pk_baseline_stale(&noisy, now, 0, 0, why, sizeof why)); /* default 0.1 */
    assert_null(pk_baseline_stale(&noisy, now, 0.3, 3600, why, sizeof why));

    pk_baseline_entry old = fresh;
    old.measured_at = now - 7200;
    assert_non_null(pk_baseline_stale(&old, now, 0.1, 3600, why, sizeof why));
    assert_non_null(strstr(why, "7200 s old"));
    old.measured_at = now - 2 * PK_BASELINE_DEFAULT_MAX_AGE_S;
    assert_non_null(pk_baseline_stale(&old, now, 0, 0, why, sizeof why));

    /* An entry written by the first format: no CV, no time: never trusted. */
    char *dir = NULL;
    pk_error err;
    assert_int_equal(pk_baseline_cache_open(root, &dir, &err), PK_OK);
    pk_baseline_key k = {.problem_id = "selftest/scale",
                         .meta_json = "{}",
                         .world_size = 2,
                         .device = "host",
                         .driver = "host",
                         .nccl = "none"};
    pk_baseline_entry e = {.us = 42, .cv = 0.01, .iters = 20, .measured_at = now};
    assert_int_equal(pk_baseline_cache_store(dir, &k, &e, &err), PK_OK);
    /* Rewrite the file in the first format, under the same name. */
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "for f in %s/*.txt; do grep -q 'problem=selftest/scale' \"$f\" && "
             "{ head -n1 \"$f\" > \"$f.new\"; echo 42.5 >> \"$f.new\"; mv \"$f.new\" \"$f\"; }; "
             "done; true",
             dir);
    assert_int_equal(system(cmd), 0);
    pk_baseline_entry got;
    assert_int_equal(pk_baseline_cache_lookup(dir, &k, &got), 1);
    assert_true(got.us == 42.5 && got.cv < 0 && got.measured_at == 0);
    assert_non_null(pk_baseline_stale(&got, now, 0, 0, why, sizeof why));
    assert_non_null(strstr(why, "not recorded"));
    free(dir);
}

static void test_host_info(void **state) {
    pk_host_info h;
    pk_host_info_read(&h);
    /* Without an NVIDIA driver these say so rather than guess. */
    assert_true(h.gpu_model[0] && h.driver[0] && h.nccl[0]);
    if (!pk_path_exists("/proc/driver/nvidia/version")) {
        assert_string_equal(h.gpu_model, "none");
        assert_string_equal(h.driver, "none");
    }
    assert_string_not_equal(h.cpu_model, "unknown");
}

typedef struct gate_arg {
    pk_key_gate *g;
    volatile int entered;
} gate_arg;

static void *enter_k(void *p) {
    gate_arg *a = p;
    pk_key_gate_enter(a->g, "k");
    __atomic_store_n(&a->entered, 1, __ATOMIC_SEQ_CST);
    pk_key_gate_leave(a->g, "k");
    return NULL;
}

static void test_key_gate(void **state) {
    pk_key_gate g;
    pk_key_gate_init(&g);
    assert_int_equal(pk_key_gate_enter(&g, "k"), PK_OK);
    assert_int_equal(pk_key_gate_enter(&g, "other"), PK_OK); /* other keys do not wait */
    gate_arg a = {.g = &g};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, enter_k, &a), 0);
    usleep(100000);
    assert_int_equal(__atomic_load_n(&a.entered, __ATOMIC_SEQ_CST), 0); /* "k" is held */
    pk_key_gate_leave(&g, "k");
    pthread_join(th, NULL);
    assert_int_equal(a.entered, 1);
    assert_int_equal(g.waits, 1);
    pk_key_gate_leave(&g, "other");
    pk_key_gate_destroy(&g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_compile_cache),  cmocka_unit_test(test_compile_cache_private),
        cmocka_unit_test(test_baseline_cache), cmocka_unit_test(test_baseline_staleness),
        cmocka_unit_test(test_host_info),      cmocka_unit_test(test_key_gate),
    };
    return cmocka_run_group_tests(tests, make_root, remove_root);
}
