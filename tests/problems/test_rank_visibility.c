/* --rank-visibility own (issue 30, lever 1): which GPU each rank process keeps of the job's
 * CUDA_VISIBLE_DEVICES, and which setting a job runs with. No GPU needed; the GPU test
 * (collectives_gpu_rank_visibility_own) checks that NCCL still takes NVLink with it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pk_harness.h"
#include "pk_runner.h"

#define UUID0 "GPU-0a1b2c3d-0000-1111-2222-333344445555"
#define UUID1 "GPU-9f8e7d6c-aaaa-bbbb-cccc-ddddeeeeffff"

static void each_rank_keeps_its_entry(void **state) {
    (void)state;
    char out[128];
    /* UUIDs in rank order, as the sandbox sets them */
    assert_int_equal(rn_visible_own(UUID0 "," UUID1, 0, out, sizeof out), 0);
    assert_string_equal(out, UUID0);
    assert_int_equal(rn_visible_own(UUID0 "," UUID1, 1, out, sizeof out), 0);
    assert_string_equal(out, UUID1);
    /* a job on GPUs given in another order: rank order, not index order */
    assert_int_equal(rn_visible_own(UUID1 "," UUID0, 0, out, sizeof out), 0);
    assert_string_equal(out, UUID1);
    /* positions among the job's GPUs (a driver without UUIDs) */
    assert_int_equal(rn_visible_own("1,0,3,2", 2, out, sizeof out), 0);
    assert_string_equal(out, "3");
    assert_int_equal(rn_visible_own("1,0,3,2", 3, out, sizeof out), 0);
    assert_string_equal(out, "2");
    /* no list (the runner outside the sandbox): rank r used device r, it keeps it */
    assert_int_equal(rn_visible_own(NULL, 3, out, sizeof out), 0);
    assert_string_equal(out, "3");
    assert_int_equal(rn_visible_own("", 1, out, sizeof out), 0);
    assert_string_equal(out, "1");
}

static void no_entry_is_an_error(void **state) {
    (void)state;
    char out[128], tiny[8];
    assert_int_equal(rn_visible_own(UUID0 "," UUID1, 2, out, sizeof out), -1);
    assert_int_equal(rn_visible_own("0", 1, out, sizeof out), -1);
    assert_int_equal(rn_visible_own("0,,1", 1, out, sizeof out), -1); /* empty entry */
    assert_int_equal(rn_visible_own("0,1", -1, out, sizeof out), -1);
    assert_int_equal(rn_visible_own(UUID0, 0, tiny, sizeof tiny), -1); /* never truncated */
}

static void apply_narrows_the_environment(void **state) {
    (void)state;
    setenv("CUDA_VISIBLE_DEVICES", UUID0 "," UUID1, 1);
    assert_int_equal(rn_visible_apply(1), 0);
    assert_string_equal(getenv("CUDA_VISIBLE_DEVICES"), UUID1);
    setenv("CUDA_VISIBLE_DEVICES", "0", 1);
    assert_int_equal(rn_visible_apply(1), -1);
    assert_string_equal(getenv("CUDA_VISIBLE_DEVICES"), "0"); /* unchanged on failure */
    unsetenv("CUDA_VISIBLE_DEVICES");
}

static void setting_of_a_job(void **state) {
    (void)state;
    pk_eval_opts o;
    memset(&o, 0, sizeof o);
    assert_int_equal(pk_rank_visibility_parse("own"), PK_RANK_VISIBILITY_OWN);
    assert_int_equal(pk_rank_visibility_parse("all"), PK_RANK_VISIBILITY_ALL);
    assert_int_equal(pk_rank_visibility_parse("mine"), -1);
    assert_int_equal(pk_rank_visibility_parse(NULL), -1);
    unsetenv("PKGYM_RANK_VISIBILITY");
    assert_int_equal(pk_rank_visibility_of(&o), PK_RANK_VISIBILITY_ALL); /* unchanged default */
    assert_int_equal(pk_rank_visibility_of(NULL), PK_RANK_VISIBILITY_ALL);
    setenv("PKGYM_RANK_VISIBILITY", "own", 1);
    assert_int_equal(pk_rank_visibility_of(&o), PK_RANK_VISIBILITY_OWN);
    o.rank_visibility = PK_RANK_VISIBILITY_ALL; /* the job's own setting wins */
    assert_int_equal(pk_rank_visibility_of(&o), PK_RANK_VISIBILITY_ALL);
    setenv("PKGYM_RANK_VISIBILITY", "bogus", 1);
    o.rank_visibility = 0;
    assert_int_equal(pk_rank_visibility_of(&o), PK_RANK_VISIBILITY_ALL);
    o.rank_visibility = PK_RANK_VISIBILITY_OWN;
    assert_int_equal(pk_rank_visibility_of(&o), PK_RANK_VISIBILITY_OWN);
    unsetenv("PKGYM_RANK_VISIBILITY");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(each_rank_keeps_its_entry),
        cmocka_unit_test(no_entry_is_an_error),
        cmocka_unit_test(apply_narrows_the_environment),
        cmocka_unit_test(setting_of_a_job),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
