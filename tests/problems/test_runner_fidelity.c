/* The runner's defences that need no GPU: the secret plan (jitter, slot order, verified
 * calls), the arena layout with guard zones, and the guard check that names the argument,
 * the side and the offset of a stray write. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pk_runner.h"

static void plan_is_secret_and_jittered(void **state) {
    (void)state;
    static rn_plan a, b;
    int trials_seen[3] = {0}, iters_min = 1 << 30, iters_max = 0;
    for (uint64_t seed = 1; seed <= 200; seed++) {
        rn_plan_make(seed, 5, 40, 100, 2, 4, &a);
        assert_true(a.trials >= 5 && a.trials <= 7);
        trials_seen[a.trials - 5] = 1;
        assert_true(a.warmup_iters >= 35 && a.warmup_iters <= 45);
        int total = a.block[0][0].n + a.block[0][1].n;
        assert_int_equal(total, a.block[1][0].n + a.block[1][1].n); /* both sides alike */
        assert_true(total >= 88 && total <= 112);
        iters_min = total < iters_min ? total : iters_min;
        iters_max = total > iters_max ? total : iters_max;
        assert_true(a.block[0][0].n > 0 && a.block[0][1].n > 0);
    }
    assert_true(trials_seen[0] && trials_seen[1] && trials_seen[2]);
    assert_true(iters_max - iters_min >= 15);
    long sum = 0; /* symmetric: as many calls as asked for, on average */
    for (uint64_t seed = 1000; seed < 3000; seed++) {
        rn_plan_make(seed, 5, 40, 100, 2, 4, &a);
        sum += a.block[0][0].n + a.block[0][1].n;
    }
    assert_true(sum / 2000.0 > 98 && sum / 2000.0 < 102);
    /* Same seed, same plan on every rank; another seed, another plan. */
    rn_plan_make(77, 5, 40, 100, 2, 4, &a);
    rn_plan_make(77, 5, 40, 100, 2, 4, &b);
    assert_memory_equal(&a, &b, sizeof a);
    rn_plan_make(78, 5, 40, 100, 2, 4, &b);
    assert_memory_not_equal(a.block[0][0].slot, b.block[0][0].slot, 20);
    assert_true(a.guard_seed != b.guard_seed && a.sample_key != b.sample_key);
}

/* timing.blocks: the calls split into that many blocks per side (fewer when there are fewer
 * calls), the same sizes on both sides, every block non-empty, sizes near an even share but
 * secret (they vary with the seed). */
static void plan_splits_into_blocks(void **state) {
    (void)state;
    static rn_plan a;
    int first_min = 1 << 30, first_max = 0;
    for (uint64_t seed = 1; seed <= 200; seed++) {
        rn_plan_make(seed, 5, 40, 300, 16, 64, &a);
        assert_int_equal(a.blocks, 16);
        int total = 0;
        for (int b = 0; b < a.blocks; b++) {
            assert_int_equal(a.block[0][b].n, a.block[1][b].n);
            assert_true(a.block[0][b].n >= 1 && a.block[0][b].n <= 2 * 300 / 16);
            total += a.block[0][b].n;
        }
        assert_true(total >= 263 && total <= 337);
        first_min = a.block[0][0].n < first_min ? a.block[0][0].n : first_min;
        first_max = a.block[0][0].n > first_max ? a.block[0][0].n : first_max;
    }
    assert_true(first_max - first_min >= 4);
    rn_plan_make(3, 5, 40, 3, 16, 4, &a); /* 3 calls (x jitter): at most one block per call */
    assert_true(a.blocks >= 1 && a.blocks <= 3);
    rn_plan_make(3, 5, 40, 100, 0, 4, &a); /* out of range: clamped */
    assert_int_equal(a.blocks, 1);
    rn_plan_make(3, 5, 40, 100, 99, 4, &a);
    assert_int_equal(a.blocks, PK_MAX_TIMING_BLOCKS);
}

/* The timing phase's expected length, from the trials' pace: the first trial (lazy loading)
 * counts only when it is alone; every call, verified call, fill and warm-up is counted. */
static void timing_expectation_counts_every_call(void **state) {
    (void)state;
    static rn_plan a;
    rn_plan_make(7, 5, 40, 100, 2, 4, &a);
    rn_pace pace = {0};
    assert_true(rn_timing_expect_ms(&a, &pace, 2, 4, 300) == 0); /* no trial: no estimate */
    rn_pace_add(&pace, 1, 5.0, 400.0, 2.0);                      /* trial 0: connection set-up */
    double first = rn_timing_expect_ms(&a, &pace, 2, 4, 300);
    assert_true(first > 0);
    rn_pace_add(&pace, 0, 0.5, 0.25, 0.125);
    rn_pace_add(&pace, 0, 0.25, 0.5, 0.0625); /* the slowest of each part */
    assert_int_equal(pace.later, 2);
    double per = 0.5 + 0.5, sync = 0.125, want = 0;
    int chunks = (a.warmup_iters + 15) / 16 + 1;
    for (int who = 0; who < 2; who++) {
        double warm = a.warmup_iters * per; /* ~40 ms: below the cap */
        want += 4 * 0.5 + warm + chunks * sync + sync;
        for (int b = 0; b < a.blocks; b++)
            want += 4 * 0.5 + sync + (a.block[who][b].n + 1 + a.block[who][b].n_verified) * per;
    }
    double got = rn_timing_expect_ms(&a, &pace, 2, 4, 300);
    assert_true(got > want - 1e-9 && got < want + 1e-9);
    assert_true(got < first);
    /* The slowest rank's pace, part by part. */
    rn_pace other = {.fill_ms = 0.1, .calls_ms = 2.0, .sync_ms = 0.01, .later = 2}, worst = pace;
    rn_pace_max(&worst, &other);
    assert_true(worst.fill_ms == 0.5 && worst.calls_ms == 2.0 && worst.sync_ms == 0.125);
    assert_true(worst.first_calls_ms == 400.0 && worst.later == 2);
    /* A slow call hits the warm-up's time cap; one side only when the reference is cached. */
    rn_pace slow = {.fill_ms = 1, .calls_ms = 99, .sync_ms = 10, .later = 1};
    double one = rn_timing_expect_ms(&a, &slow, 1, 4, 300);
    double calls = 0;
    for (int b = 0; b < a.blocks; b++)
        calls += a.block[0][b].n + a.block[0][b].n_verified;
    /* the cap plus one chunk, a sync per chunk, per block and one more */
    want = 4 + 300 + 16 * 100 + (chunks + 1) * 10 + a.blocks * (4 + 10 + 100) + calls * 100;
    assert_true(one > want - 1e-6 && one < want + 1e-6);
}

/* Every slot's last call is verified, others with probability about 1/4, reference blocks
 * never; no slot is used twice in a row; every slot is used. */
static void plan_verifies_last_calls_and_some_others(void **state) {
    (void)state;
    static rn_plan p;
    long verified[2] = {0, 0}, calls[2] = {0, 0}; /* [2 blocks, 7 blocks] */
    for (uint64_t seed = 1; seed <= 200; seed++) {
        const int seven = seed % 2 == 0;
        rn_plan_make(seed, 5, 10, 200, seven ? 7 : 2, 6, &p);
        assert_int_equal(p.blocks, seven ? 7 : 2);
        for (int blk = 0; blk < p.blocks; blk++) {
            const rn_block_plan *c = &p.block[0][blk], *r = &p.block[1][blk];
            assert_int_equal(r->n_verified, 0);
            int last[RN_MAX_COPIES], used[RN_MAX_COPIES] = {0}, next_index = 0;
            for (int i = 0; i < c->n; i++) {
                last[c->slot[i]] = i;
                used[c->slot[i]] = 1;
                assert_true(c->slot[i] < 6);
                if (i)
                    assert_true(c->slot[i] != c->slot[i - 1]);
                if (c->verify[i] >= 0)
                    assert_int_equal(c->verify[i], next_index++);
            }
            assert_int_equal(next_index, c->n_verified);
            for (int s = 0; s < 6; s++) {
                assert_true(used[s]);
                assert_true(c->verify[last[s]] >= 0);
            }
            verified[seven] += c->n_verified;
            calls[seven] += c->n;
        }
    }
    /* 1/4 plus the last calls: 6 of ~100 per block at 2 blocks, 6 of ~29 at 7. */
    double share2 = (double)verified[0] / (double)calls[0];
    double share7 = (double)verified[1] / (double)calls[1];
    assert_true(share2 > 0.25 && share2 < 0.35);
    assert_true(share7 > 0.36 && share7 < 0.47);
}

static pk_problem *two_arg_problem(void) {
    pk_problem *p = calloc(1, sizeof *p);
    p->n_args = 2;
    strcpy(p->args[0].name, "x");
    p->args[0].dtype = PK_DTYPE_BF16;
    p->args[0].role = PK_ARG_INPUT;
    strcpy(p->args[1].name, "y");
    p->args[1].dtype = PK_DTYPE_BF16;
    p->args[1].role = PK_ARG_OUTPUT;
    p->scratch_bytes = 100;
    p->l2_multiple = 3;
    return p;
}

static void layout_puts_zones_around_every_argument(void **state) {
    (void)state;
    pk_problem *p = two_arg_problem();
    pk_problem_sizes sz = {0};
    sz.counts[0] = sz.counts[1] = 1001; /* odd: an argument's end is not aligned */
    static rn_layout l;
    assert_int_equal(rn_layout_make(p, &sz, 0, &l), 0);
    assert_int_equal(l.copies, RN_MIN_COPIES);
    assert_int_equal(l.n_zones, RN_MIN_COPIES * 4 + 2);
    /* Zones and arguments tile the slots with no gap: every non-argument byte is guarded. */
    uint64_t covered = 0;
    for (int z = 0; z < l.n_zones; z++) {
        assert_true(l.zones[z].hi > l.zones[z].lo);
        assert_true(l.zones[z].hi - l.zones[z].lo >= RN_GUARD_BYTES);
        covered += l.zones[z].hi - l.zones[z].lo;
    }
    uint64_t args = (uint64_t)RN_MIN_COPIES * (l.arg_bytes[0] + l.arg_bytes[1]);
    assert_true(covered + args + l.scratch_bytes == l.arena_bytes);
    /* The byte right after y in slot 2 is the first byte of y's after-zone. */
    size_t y_end = 2 * l.set_bytes + l.arg_off[1] + l.arg_bytes[1];
    int found = 0;
    for (int z = 0; z < l.n_zones; z++)
        found |= l.zones[z].lo == y_end && l.zones[z].arg == 1 && l.zones[z].after;
    assert_true(found);
    /* Enough copies to exceed 3 x L2 when the set is small. */
    assert_int_equal(rn_layout_make(p, &sz, 50u << 20, &l), 0);
    assert_true((double)l.copies * l.set_bytes >= 3.0 * (50u << 20) || l.copies == RN_MAX_COPIES);
    free(p);
}

/* A stray write is found, and named by argument, side and offset; untouched zones pass. */
static void guards_name_the_stray_write(void **state) {
    (void)state;
    pk_problem *p = two_arg_problem();
    pk_problem_sizes sz = {0};
    sz.counts[0] = sz.counts[1] = 1001;
    static rn_layout l;
    rn_layout_make(p, &sz, 0, &l);
    rn_backend b;
    pk_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    rn_backend_host_init(&b, &ctx);
    unsigned char *arena = calloc(1, l.arena_bytes);
    b.fill_guards(&b, arena, l.zones, l.n_zones, 1234);
    rn_guard_hit hit;
    b.check_guards(&b, arena, l.zones, l.n_zones, 1234, &hit);
    assert_int_equal(hit.zone, -1);
    /* The arguments themselves may be written freely. */
    memset(arena + l.arg_off[1], 0xab, l.arg_bytes[1]);
    b.check_guards(&b, arena, l.zones, l.n_zones, 1234, &hit);
    assert_int_equal(hit.zone, -1);
    /* One bf16 element past the end of y in slot 1. */
    size_t y = l.set_bytes + l.arg_off[1];
    arena[y + l.arg_bytes[1]] ^= 0xff;
    arena[y + l.arg_bytes[1] + 1] ^= 0xff;
    b.check_guards(&b, arena, l.zones, l.n_zones, 1234, &hit);
    assert_true(hit.zone >= 0);
    assert_int_equal(l.zones[hit.zone].arg, 1);
    assert_int_equal(l.zones[hit.zone].after, 1);
    assert_true(hit.bytes == 2 && hit.first == 0 && hit.last == 1);
    char line[256];
    rn_guard_describe(p, &l, &hit, 1, line, sizeof line);
    assert_non_null(strstr(line, "rank 1"));
    assert_non_null(strstr(line, "past the end of output y"));
    assert_non_null(strstr(line, "+0"));
    b.fill_guards(&b, arena, l.zones, l.n_zones, 1234);
    /* Four bytes just before x in slot 0. */
    memset(arena + l.arg_off[0] - 4, 0, 4);
    b.check_guards(&b, arena, l.zones, l.n_zones, 1234, &hit);
    assert_true(hit.zone >= 0);
    assert_int_equal(l.zones[hit.zone].arg, 0);
    assert_int_equal(l.zones[hit.zone].after, 0);
    rn_guard_describe(p, &l, &hit, 0, line, sizeof line);
    assert_non_null(strstr(line, "before the start of input x"));
    assert_non_null(strstr(line, "-4 to -1") ? strstr(line, "-4 to -1") : strstr(line, "-1"));
    /* The pattern is secret per step: another seed does not match. */
    b.fill_guards(&b, arena, l.zones, l.n_zones, 1234);
    b.check_guards(&b, arena, l.zones, l.n_zones, 4321, &hit);
    assert_true(hit.zone == 0 && hit.bytes > RN_GUARD_BYTES / 2);
    free(arena);
    free(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(plan_is_secret_and_jittered),
        cmocka_unit_test(plan_verifies_last_calls_and_some_others),
        cmocka_unit_test(plan_splits_into_blocks),
        cmocka_unit_test(timing_expectation_counts_every_call),
        cmocka_unit_test(layout_puts_zones_around_every_argument),
        cmocka_unit_test(guards_name_the_stray_write),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
