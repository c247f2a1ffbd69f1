/* pk_gpu_nodes on fake driver data: GPU index (PCI bus order) to device minor and UUID, with
 * minors permuted against PCI order, GPUs the driver says little about, and 8 GPUs; and the
 * CUDA_VISIBLE_DEVICES that names a job's GPUs inside the sandbox. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pk_gpu_nodes.h"

static char root[256];

/* One GPU directory; info NULL: no information file. */
static void fake_gpu(const char *bus, const char *info) {
    char path[512];
    snprintf(path, sizeof path, "%s/gpus", root);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/gpus/%s", root, bus);
    assert_int_equal(mkdir(path, 0755), 0);
    if (!info)
        return;
    snprintf(path, sizeof path, "%s/gpus/%s/information", root, bus);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(info, f);
    fclose(f);
}

static void fake_gpu_minor(const char *bus, int minor, const char *uuid) {
    char info[512];
    snprintf(info, sizeof info,
             "Model: \t\t NVIDIA H200\nIRQ:   \t\t 17\nGPU UUID: \t %s\nVideo BIOS: \t 96.00\n"
             "Bus Type: \t PCIe\nBus Location: \t %s\nDevice Minor: \t %d\nGPU Excluded:\t No\n",
             uuid, bus, minor);
    fake_gpu(bus, info);
}

static int setup(void **state) {
    (void)state;
    snprintf(root, sizeof root, "/tmp/pk-gpu-nodes-XXXXXX");
    assert_non_null(mkdtemp(root));
    return 0;
}

static int teardown(void **state) {
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    return system(cmd) == 0 ? 0 : -1;
}

static void permuted_minors_follow_the_driver(void **state) {
    (void)state;
    /* Listed out of order, mixed case; minors in reverse of PCI order. */
    fake_gpu_minor("0000:BA:00.0", 0, "GPU-cccc");
    fake_gpu_minor("0000:18:00.0", 2, "GPU-aaaa");
    fake_gpu_minor("0000:3a:00.0", 1, "GPU-bbbb");
    pk_gpu_nodes m;
    pk_error err = {0};
    assert_int_equal(pk_gpu_nodes_read(root, &m, &err), PK_OK);
    assert_int_equal(m.n, 3);
    assert_string_equal(m.gpu[0].bus_id, "0000:18:00.0");
    assert_string_equal(m.gpu[1].bus_id, "0000:3a:00.0");
    assert_string_equal(m.gpu[2].bus_id, "0000:ba:00.0");
    assert_int_equal(pk_gpu_nodes_lookup(&m, 0, &err)->minor, 2);
    assert_int_equal(pk_gpu_nodes_lookup(&m, 1, &err)->minor, 1);
    assert_int_equal(pk_gpu_nodes_lookup(&m, 2, &err)->minor, 0);
    assert_string_equal(m.gpu[2].uuid, "GPU-cccc");
    char v[256];
    int reverse[] = {2, 0};
    assert_int_equal(pk_gpu_nodes_visible(&m, reverse, 2, v, sizeof v, &err), PK_OK);
    assert_string_equal(v, "GPU-cccc,GPU-aaaa");
}

static void missing_nodes_are_errors_when_used(void **state) {
    (void)state;
    fake_gpu_minor("0000:18:00.0", 0, "GPU-aaaa");
    fake_gpu("0000:3a:00.0", NULL); /* no information file */
    fake_gpu("0000:5d:00.0", "Model: \t NVIDIA H200\nGPU UUID: \t GPU-cccc\n"); /* no minor */
    pk_gpu_nodes m;
    pk_error err = {0};
    assert_int_equal(pk_gpu_nodes_read(root, &m, &err), PK_OK);
    assert_int_equal(m.n, 3);
    assert_non_null(pk_gpu_nodes_lookup(&m, 0, &err));
    assert_null(pk_gpu_nodes_lookup(&m, 1, &err));
    assert_non_null(strstr(err.message, "0000:3a:00.0"));
    assert_null(pk_gpu_nodes_lookup(&m, 2, &err));
    assert_null(pk_gpu_nodes_lookup(&m, 3, &err));
    assert_non_null(strstr(err.message, "3 GPU(s)"));
    assert_null(pk_gpu_nodes_lookup(&m, -1, &err));
    char v[64];
    int two[] = {0, 2};
    assert_int_not_equal(pk_gpu_nodes_visible(&m, two, 2, v, sizeof v, &err), PK_OK);
}

static void no_driver_list_is_not_found(void **state) {
    (void)state;
    pk_gpu_nodes m;
    pk_error err = {0};
    assert_int_equal(pk_gpu_nodes_read(root, &m, &err), PK_ERR_NOT_FOUND);
    assert_int_equal(m.n, 0);
}

static void eight_gpus_any_subset(void **state) {
    (void)state;
    /* 8 GPUs on two PCI domains; minors a permutation of 0..7. */
    const char *bus[8] = {"0000:19:00.0", "0000:3b:00.0", "0000:4c:00.0", "0000:5d:00.0",
                          "0001:9b:00.0", "0001:bb:00.0", "0001:cb:00.0", "0001:db:00.0"};
    const int minor[8] = {4, 0, 7, 2, 6, 1, 5, 3};
    for (int i = 7; i >= 0; i--) {
        char uuid[32];
        snprintf(uuid, sizeof uuid, "GPU-%d", i);
        fake_gpu_minor(bus[i], minor[i], uuid);
    }
    pk_gpu_nodes m;
    pk_error err = {0};
    assert_int_equal(pk_gpu_nodes_read(root, &m, &err), PK_OK);
    assert_int_equal(m.n, 8);
    for (int i = 0; i < 8; i++) {
        const pk_gpu_node *g = pk_gpu_nodes_lookup(&m, i, &err);
        assert_non_null(g);
        assert_string_equal(g->bus_id, bus[i]);
        assert_int_equal(g->minor, minor[i]);
    }
    char v[256];
    int high[] = {7, 6};
    assert_int_equal(pk_gpu_nodes_visible(&m, high, 2, v, sizeof v, &err), PK_OK);
    assert_string_equal(v, "GPU-7,GPU-6");
    int all[] = {3, 1, 4, 0, 5, 2, 6, 7};
    assert_int_equal(pk_gpu_nodes_visible(&m, all, 8, v, sizeof v, &err), PK_OK);
    assert_string_equal(v, "GPU-3,GPU-1,GPU-4,GPU-0,GPU-5,GPU-2,GPU-6,GPU-7");
    assert_int_not_equal(pk_gpu_nodes_visible(&m, all, 8, v, 20, &err), PK_OK);
}

/* Without UUIDs (or masked ones), the job's GPUs are named by their positions in PCI order
 * among themselves: what CUDA enumerates when only their nodes exist. */
static void without_uuids_positions_among_the_job(void **state) {
    (void)state;
    fake_gpu_minor("0000:18:00.0", 3, "GPU-aaaa");
    fake_gpu_minor("0000:3a:00.0", 2, "GPU-????????");
    fake_gpu_minor("0000:5d:00.0", 1, "n/a");
    fake_gpu_minor("0000:ba:00.0", 0, "GPU-dddd");
    pk_gpu_nodes m;
    pk_error err = {0};
    assert_int_equal(pk_gpu_nodes_read(root, &m, &err), PK_OK);
    assert_string_equal(m.gpu[1].uuid, "");
    assert_string_equal(m.gpu[2].uuid, "");
    char v[64];
    int job[] = {3, 1};
    assert_int_equal(pk_gpu_nodes_visible(&m, job, 2, v, sizeof v, &err), PK_OK);
    assert_string_equal(v, "1,0");
    int job2[] = {2, 3, 0};
    assert_int_equal(pk_gpu_nodes_visible(&m, job2, 3, v, sizeof v, &err), PK_OK);
    assert_string_equal(v, "1,2,0");
    int uuids[] = {3, 0};
    assert_int_equal(pk_gpu_nodes_visible(&m, uuids, 2, v, sizeof v, &err), PK_OK);
    assert_string_equal(v, "GPU-dddd,GPU-aaaa");
}

static void root_comes_from_the_environment(void **state) {
    (void)state;
    unsetenv("PKGYM_DRIVER_PROC");
    assert_string_equal(pk_gpu_driver_root(), "/proc/driver/nvidia");
    setenv("PKGYM_DRIVER_PROC", root, 1);
    assert_string_equal(pk_gpu_driver_root(), root);
    fake_gpu_minor("0000:18:00.0", 5, "GPU-aaaa");
    pk_gpu_nodes m;
    pk_error err = {0};
    assert_int_equal(pk_gpu_nodes_read(NULL, &m, &err), PK_OK);
    assert_int_equal(m.n, 1);
    assert_int_equal(m.gpu[0].minor, 5);
    unsetenv("PKGYM_DRIVER_PROC");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(permuted_minors_follow_the_driver, setup, teardown),
        cmocka_unit_test_setup_teardown(missing_nodes_are_errors_when_used, setup, teardown),
        cmocka_unit_test_setup_teardown(no_driver_list_is_not_found, setup, teardown),
        cmocka_unit_test_setup_teardown(eight_gpus_any_subset, setup, teardown),
        cmocka_unit_test_setup_teardown(without_uuids_positions_among_the_job, setup, teardown),
        cmocka_unit_test_setup_teardown(root_comes_from_the_environment, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
