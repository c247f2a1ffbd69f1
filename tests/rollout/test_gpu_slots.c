/* pk_gpu_slots: all-or-nothing grants, FIFO by arrival, bounded backfill (no starvation),
 * and no deadlock with mixed widths, with slots as plain resources; co-residency: jobs per
 * slot and memory per slot, least loaded slots first, an oversized job alone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "pk_gpu_slots.h"

static int grant(pk_gpu_slots *s, uintptr_t *id, int *slots, int *width) {
    void *item = NULL;
    int got = pk_gpu_slots_grant(s, &item, slots, width);
    *id = (uintptr_t)item;
    return got;
}

static void test_all_or_nothing(void **state) {
    pk_gpu_slots s;
    int slots[8], w;
    uintptr_t id;
    assert_int_equal(pk_gpu_slots_init(&s, 4, 0, NULL), PK_OK);
    assert_int_equal(pk_gpu_slots_request(&s, 1, (void *)1, 3, NULL), PK_OK);
    assert_int_equal(pk_gpu_slots_request(&s, 2, (void *)2, 2, NULL), PK_OK);
    assert_int_equal(grant(&s, &id, slots, &w), 1);
    assert_int_equal(id, 1);
    assert_int_equal(w, 3);
    assert_int_equal(slots[0], 0);
    assert_int_equal(slots[2], 2);
    assert_int_equal(s.n_free, 1);
    /* One slot is free but the next job needs two: it gets nothing, not a partial hold. */
    assert_int_equal(grant(&s, &id, slots, &w), 0);
    assert_int_equal(s.n_free, 1);
    int held[3] = {0, 1, 2};
    pk_gpu_slots_release(&s, held, 3);
    assert_int_equal(grant(&s, &id, slots, &w), 1);
    assert_int_equal(id, 2);
    assert_int_equal(w, 2);
    pk_gpu_slots_destroy(&s);
}

static void test_fifo_by_arrival(void **state) {
    pk_gpu_slots s;
    int slots[8], w;
    uintptr_t id;
    assert_int_equal(pk_gpu_slots_init(&s, 1, 4, NULL), PK_OK);
    /* Requested out of order (compiles finish in any order); granted by arrival. */
    assert_int_equal(pk_gpu_slots_request(&s, 30, (void *)30, 1, NULL), PK_OK);
    assert_int_equal(pk_gpu_slots_request(&s, 10, (void *)10, 1, NULL), PK_OK);
    assert_int_equal(pk_gpu_slots_request(&s, 20, (void *)20, 1, NULL), PK_OK);
    uintptr_t expect[3] = {10, 20, 30};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(grant(&s, &id, slots, &w), 1);
        assert_int_equal(id, expect[i]);
        assert_int_equal(grant(&s, &id, slots, &w), 0);
        pk_gpu_slots_release(&s, slots, w);
    }
    pk_gpu_slots_destroy(&s);
}

static void test_backfill_then_reservation(void **state) {
    pk_gpu_slots s;
    int slots[8], w, x[8], xw, a[8], aw;
    uintptr_t id;
    assert_int_equal(pk_gpu_slots_init(&s, 4, 1, NULL), PK_OK);
    assert_int_equal(pk_gpu_slots_request(&s, 1, (void *)1, 2, NULL), PK_OK);
    assert_int_equal(grant(&s, &id, x, &xw), 1);                              /* X holds 2 of 4 */
    assert_int_equal(pk_gpu_slots_request(&s, 2, (void *)2, 4, NULL), PK_OK); /* wide head */
    assert_int_equal(pk_gpu_slots_request(&s, 3, (void *)3, 1, NULL), PK_OK);
    assert_int_equal(pk_gpu_slots_request(&s, 4, (void *)4, 1, NULL), PK_OK);
    /* One backfill may pass the wide head, so a free GPU does not idle behind it ... */
    assert_int_equal(grant(&s, &id, a, &aw), 1);
    assert_int_equal(id, 3);
    assert_int_equal(s.backfilled, 1);
    /* ... but then the head holds a reservation: the free slot stays for it. */
    assert_int_equal(s.n_free, 1);
    assert_int_equal(grant(&s, &id, slots, &w), 0);
    pk_gpu_slots_release(&s, x, xw);
    assert_int_equal(grant(&s, &id, slots, &w), 0); /* 3 free, head needs 4 */
    pk_gpu_slots_release(&s, a, aw);
    assert_int_equal(grant(&s, &id, slots, &w), 1);
    assert_int_equal(id, 2);
    assert_int_equal(w, 4);
    pk_gpu_slots_release(&s, slots, w);
    assert_int_equal(grant(&s, &id, slots, &w), 1);
    assert_int_equal(id, 4);
    pk_gpu_slots_destroy(&s);
}

static void test_invalid_and_pop(void **state) {
    pk_gpu_slots s;
    pk_error err;
    void *item;
    assert_int_equal(pk_gpu_slots_init(&s, 2, 4, NULL), PK_OK);
    assert_int_equal(pk_gpu_slots_request(&s, 1, NULL, 3, &err), PK_ERR_INVALID);
    assert_non_null(strstr(err.message, "needing 3"));
    assert_int_equal(pk_gpu_slots_request(&s, 1, NULL, 0, &err), PK_ERR_INVALID);
    assert_int_equal(pk_gpu_slots_pop_waiting(&s, &item), 0);
    assert_int_equal(pk_gpu_slots_request(&s, 7, (void *)7, 2, NULL), PK_OK);
    assert_int_equal(pk_gpu_slots_pop_waiting(&s, &item), 1);
    assert_ptr_equal(item, (void *)7);
    assert_int_equal(s.n_queued, 0);
    pk_gpu_slots_destroy(&s);
    assert_int_equal(pk_gpu_slots_init(&s, PK_GPU_SLOTS_MAX + 1, 0, &err), PK_ERR_INVALID);
}

/* Random mixed widths on 8 slots: no slot is ever held twice, every request is granted
 * (no deadlock), whenever nothing runs the head is granted, and no request is passed by
 * more than max_bypass later ones (no starvation). */
#define SIM_N 3000
typedef struct sim_job {
    int width, granted, done;
    int slots[8];
    int passed_by; /* later requests granted while this one waited */
} sim_job;

static void test_random_mixed_widths(void **state) {
    static sim_job jobs[SIM_N];
    memset(jobs, 0, sizeof jobs);
    const int widths[] = {1, 2, 2, 4, 8, 1, 2};
    const int max_bypass = 3;
    pk_gpu_slots s;
    assert_int_equal(pk_gpu_slots_init(&s, 8, max_bypass, NULL), PK_OK);
    unsigned char held[8] = {0};
    int running[SIM_N], n_running = 0, submitted = 0, finished = 0;
    srand(12345);
    while (finished < SIM_N) {
        if (submitted < SIM_N && rand() % 3) {
            jobs[submitted].width = widths[rand() % 7];
            assert_int_equal(pk_gpu_slots_request(&s, (uint64_t)submitted,
                                                  (void *)(uintptr_t)(submitted + 1),
                                                  jobs[submitted].width, NULL),
                             PK_OK);
            submitted++;
        }
        void *item;
        int slots[8], w;
        while (pk_gpu_slots_grant(&s, &item, slots, &w)) {
            int k = (int)((uintptr_t)item - 1);
            assert_int_equal(w, jobs[k].width);
            for (int i = 0; i < w; i++) {
                assert_int_equal(held[slots[i]], 0);
                held[slots[i]] = 1;
            }
            for (int o = 0; o < submitted; o++)
                if (o < k && !jobs[o].granted)
                    jobs[o].passed_by++;
            memcpy(jobs[k].slots, slots, sizeof slots);
            jobs[k].granted = 1;
            running[n_running++] = k;
        }
        if (n_running == 0) {
            /* Nothing holds a slot: a waiting request must have been granted above. */
            assert_int_equal(s.n_queued, 0);
            if (submitted == SIM_N)
                break;
            continue;
        }
        if (rand() % 2 || submitted == SIM_N) {
            int r = rand() % n_running;
            int k = running[r];
            running[r] = running[--n_running];
            for (int i = 0; i < jobs[k].width; i++)
                held[jobs[k].slots[i]] = 0;
            pk_gpu_slots_release(&s, jobs[k].slots, jobs[k].width);
            jobs[k].done = 1;
            finished++;
        }
    }
    int max_passed = 0;
    for (int k = 0; k < SIM_N; k++) {
        assert_true(jobs[k].granted && jobs[k].done);
        if (jobs[k].passed_by > max_passed)
            max_passed = jobs[k].passed_by;
    }
    assert_true(max_passed <= max_bypass);
    assert_true(s.backfilled > 0); /* backfill did happen, so the bound was exercised */
    pk_gpu_slots_destroy(&s);
}

/* Two jobs per GPU: two 2-GPU jobs hold both GPUs at once, a third waits for one of them. */
static void test_jobs_per_slot(void **state) {
    pk_gpu_slots s;
    int a[8], b[8], c[8], w;
    uintptr_t id;
    assert_int_equal(pk_gpu_slots_init(&s, 2, 4, NULL), PK_OK);
    assert_int_equal(pk_gpu_slots_set_capacity(&s, 2, 0, NULL), PK_OK);
    assert_int_equal(pk_gpu_slots_set_capacity(&s, 0, 0, NULL), PK_ERR_INVALID);
    for (uintptr_t k = 1; k <= 3; k++)
        assert_int_equal(pk_gpu_slots_request(&s, k, (void *)k, 2, NULL), PK_OK);
    assert_int_equal(grant(&s, &id, a, &w), 1);
    assert_int_equal(grant(&s, &id, b, &w), 1);
    assert_int_equal(id, 2);
    assert_int_equal(b[0], 0);
    assert_int_equal(b[1], 1);
    assert_int_equal(s.load[0], 2);
    assert_int_equal(s.n_free, 0);
    assert_int_equal(grant(&s, &id, c, &w), 0); /* full: 2 jobs on each GPU */
    pk_gpu_slots_release(&s, a, 2);
    assert_int_equal(grant(&s, &id, c, &w), 1);
    assert_int_equal(id, 3);
    pk_gpu_slots_release(&s, b, 2);
    pk_gpu_slots_release(&s, c, 2);
    assert_int_equal(s.n_free, 2);
    assert_int_equal(s.load[0] + s.load[1], 0);
    pk_gpu_slots_destroy(&s);
}

/* Memory per slot: a job that fits by count waits until memory is free; 1-slot jobs go to
 * the least loaded slots; a job larger than a slot's memory runs alone. */
static void test_memory_and_spreading(void **state) {
    pk_gpu_slots s;
    int x[8], y[8], z[8], big[8], w;
    uintptr_t id;
    assert_int_equal(pk_gpu_slots_init(&s, 2, 4, NULL), PK_OK);
    assert_int_equal(pk_gpu_slots_set_capacity(&s, 8, 100, NULL), PK_OK);
    assert_int_equal(pk_gpu_slots_request_mem(&s, 1, (void *)1, 1, 60, NULL), PK_OK);
    assert_int_equal(pk_gpu_slots_request_mem(&s, 2, (void *)2, 1, 60, NULL), PK_OK);
    assert_int_equal(grant(&s, &id, x, &w), 1);
    assert_int_equal(grant(&s, &id, y, &w), 1);
    assert_true(x[0] != y[0]); /* spread over the two GPUs */
    assert_int_equal(pk_gpu_slots_request_mem(&s, 3, (void *)3, 2, 30, NULL), PK_OK);
    assert_int_equal(grant(&s, &id, z, &w), 1); /* 60 + 30 <= 100 on both */
    assert_int_equal(s.mem[0], 90);
    assert_int_equal(pk_gpu_slots_request_mem(&s, 4, (void *)4, 1, 20, NULL), PK_OK);
    assert_int_equal(grant(&s, &id, z + 2, &w), 0); /* 90 + 20 > 100 everywhere */
    pk_gpu_slots_release_mem(&s, z, 2, 30);
    assert_int_equal(s.mem[0], 60);
    assert_int_equal(grant(&s, &id, z, &w), 1);
    assert_int_equal(id, 4);
    pk_gpu_slots_release_mem(&s, z, 1, 20);
    pk_gpu_slots_release_mem(&s, x, 1, 60);
    pk_gpu_slots_release_mem(&s, y, 1, 60);
    assert_int_equal(s.n_free, 2);
    /* Larger than a slot: alone, and nothing joins it while it runs. */
    assert_int_equal(pk_gpu_slots_request_mem(&s, 5, (void *)5, 2, 500, NULL), PK_OK);
    assert_int_equal(pk_gpu_slots_request_mem(&s, 6, (void *)6, 1, 10, NULL), PK_OK);
    assert_int_equal(grant(&s, &id, big, &w), 1);
    assert_int_equal(id, 5);
    assert_int_equal(grant(&s, &id, x, &w), 0);
    pk_gpu_slots_release_mem(&s, big, 2, 500);
    assert_int_equal(grant(&s, &id, x, &w), 1);
    /* Pre-grants take room only when nobody waits. */
    assert_int_equal(pk_gpu_slots_take_idle_mem(&s, 2, 50, y), 1);
    assert_int_equal(pk_gpu_slots_take_idle_mem(&s, 2, 50, y), 0); /* 10 + 50 + 50 > 100 */
    assert_int_equal(pk_gpu_slots_request_mem(&s, 7, (void *)7, 1, 10, NULL), PK_OK);
    assert_int_equal(pk_gpu_slots_take_idle_mem(&s, 1, 10, z), 0); /* 7 waits... */
    assert_int_equal(grant(&s, &id, z, &w), 1);                    /* ... and fits */
    pk_gpu_slots_destroy(&s);
}

/* Random widths and memory with 3 jobs and 100 units per slot: capacity is never exceeded,
 * every request is granted, and none is passed by more than max_bypass later ones. */
static void test_random_coresident(void **state) {
    enum { N = 3000, SLOTS = 4, PER = 3 };
    static sim_job jobs[N];
    static uint64_t mems[N];
    memset(jobs, 0, sizeof jobs);
    const int max_bypass = 3;
    pk_gpu_slots s;
    assert_int_equal(pk_gpu_slots_init(&s, SLOTS, max_bypass, NULL), PK_OK);
    assert_int_equal(pk_gpu_slots_set_capacity(&s, PER, 100, NULL), PK_OK);
    int load[SLOTS] = {0}, running[N], n_running = 0, submitted = 0, finished = 0, peak = 0;
    uint64_t mem[SLOTS] = {0};
    srand(777);
    while (finished < N) {
        if (submitted < N && rand() % 3) {
            jobs[submitted].width = 1 + rand() % SLOTS;
            mems[submitted] = (uint64_t)(10 + rand() % 60);
            assert_int_equal(pk_gpu_slots_request_mem(&s, (uint64_t)submitted,
                                                      (void *)(uintptr_t)(submitted + 1),
                                                      jobs[submitted].width, mems[submitted], NULL),
                             PK_OK);
            submitted++;
        }
        void *item;
        int slots[8], w;
        while (pk_gpu_slots_grant(&s, &item, slots, &w)) {
            int k = (int)((uintptr_t)item - 1);
            for (int i = 0; i < w; i++) {
                load[slots[i]]++;
                mem[slots[i]] += mems[k];
                assert_true(load[slots[i]] <= PER && mem[slots[i]] <= 100);
                assert_true(i == 0 || slots[i] > slots[i - 1]);
                peak = load[slots[i]] > peak ? load[slots[i]] : peak;
            }
            for (int o = 0; o < k; o++)
                if (!jobs[o].granted)
                    jobs[o].passed_by++;
            memcpy(jobs[k].slots, slots, sizeof slots);
            jobs[k].granted = 1;
            running[n_running++] = k;
        }
        if (n_running == 0) {
            assert_int_equal(s.n_queued, 0);
            if (submitted == N)
                break;
            continue;
        }
        if (rand() % 2 || submitted == N) {
            int r = rand() % n_running, k = running[r];
            running[r] = running[--n_running];
            for (int i = 0; i < jobs[k].width; i++) {
                load[jobs[k].slots[i]]--;
                mem[jobs[k].slots[i]] -= mems[k];
            }
            pk_gpu_slots_release_mem(&s, jobs[k].slots, jobs[k].width, mems[k]);
            finished++;
        }
    }
    for (int k = 0; k < N; k++) {
        assert_true(jobs[k].granted);
        assert_true(jobs[k].passed_by <= max_bypass);
    }
    assert_true(peak > 1); /* jobs did share slots */
    for (int i = 0; i < SLOTS; i++)
        assert_true(s.load[i] == 0 && s.mem[i] == 0);
    pk_gpu_slots_destroy(&s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_or_nothing),
        cmocka_unit_test(test_fifo_by_arrival),
        cmocka_unit_test(test_backfill_then_reservation),
        cmocka_unit_test(test_invalid_and_pop),
        cmocka_unit_test(test_random_mixed_widths),
        cmocka_unit_test(test_jobs_per_slot),
        cmocka_unit_test(test_memory_and_spreading),
        cmocka_unit_test(test_random_coresident),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
