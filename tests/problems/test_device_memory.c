/* pk_job_device_mb (what a scheduler reserves per GPU for one job) covers what the runner
 * allocates: its arena layout (problems/runner/layout.c, here at the H200's 60 MiB L2 and a
 * 128 MiB one), the reference, pristine and snapshot copies and the flush buffer, for every
 * GPU problem at every world size it allows. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "pk_harness.h"
#include "pk_runner.h"

static void test_estimate_covers_runner(void **state) {
    pk_problem_set *set;
    pk_error err;
    if (pk_problem_set_load(PK_TEST_PROBLEMS, PK_TEST_MODULES, &set, &err))
        fail_msg("problem set: %s", err.message);
    int checked = 0;
    for (size_t k = 0; k < pk_problem_set_count(set); k++) {
        const pk_problem *p = pk_problem_set_at(set, k);
        if (!p->device_gpu) {
            assert_int_equal(pk_job_device_mb(p, p->world_size), 0);
            continue;
        }
        for (int w = 1; w <= PK_MAX_RANKS; w++) {
            pk_problem_sizes sz;
            if (!pk_problem_world_allowed(p, w) || pk_problem_sizes_at(p, w, &sz, &err))
                continue;
            size_t l2s[2] = {60ull << 20, 128ull << 20};
            long est = pk_job_device_mb(p, w);
            for (int i = 0; i < 2; i++) {
                rn_layout lay;
                assert_int_equal(rn_layout_make(p, &sz, l2s[i], &lay), 0);
                size_t args = 0;
                for (int a = 0; a < p->n_args; a++)
                    args += lay.arg_bytes[a];
                size_t need = lay.arena_bytes + 3 * args + 2 * l2s[i];
                if ((size_t)(est - PK_JOB_GPU_OVERHEAD_MB) << 20 < need)
                    fail_msg("%s at world %d: %ld MiB estimated, the runner takes %zu MiB",
                             pk_problem_id(p), w, est, need >> 20);
            }
            checked++;
        }
    }
    assert_true(checked >= 8); /* the collectives at least */
    const pk_problem *ar = pk_problem_set_find(set, "collectives/allreduce");
    assert_non_null(ar);
    /* 2 x 64 MiB arguments: 4 copies + 64 MiB scratch + 3 copies + flush, about 1.3 GiB. */
    long mb = pk_job_device_mb(ar, 2) - PK_JOB_GPU_OVERHEAD_MB;
    assert_true(mb > 1000 && mb < 1600);
    pk_problem_set_free(set);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_estimate_covers_runner)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
