/* The scheduler with a fake executor (GPUs as plain resources): every job of mixed world
 * sizes completes (no deadlock), a wide job is not starved by a stream of narrow ones, full
 * queues answer overloaded, compile errors skip the run, harness failures and shutdown
 * cancellations are reported; within the shutdown grace queued work still compiles and runs,
 * after it only a stage already running finishes. Pre-grants: only the oldest compiling job,
 * only on idle GPUs, never while a compiled job waits; its run gets the warmed GPUs, and a
 * compile error gives them back. Sharing GPUs: up to jobs_per_gpu jobs at once and within
 * gpu_mem_mb, every compiling job warmed while there is room, held time and kernel-busy time
 * reported apart. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <zmq.h>

#include "fake_exec.h"

typedef struct fixture {
    void *zctx;
    void *done_pull;
    fake_stats st;
    pk_scheduler *s;
} fixture;

static fixture *start_opts(int n_gpus, int compile_workers, int queue_limit, int per_gpu,
                           long mem_mb) {
    static int seq;
    fixture *f = calloc(1, sizeof *f);
    char ep[64];
    snprintf(ep, sizeof ep, "inproc://test-done-%d", seq++);
    f->zctx = zmq_ctx_new();
    f->done_pull = zmq_socket(f->zctx, ZMQ_PULL);
    int timeout_ms = 30000; /* a deadlock fails the test instead of hanging it */
    zmq_setsockopt(f->done_pull, ZMQ_RCVTIMEO, &timeout_ms, sizeof timeout_ms);
    assert_int_equal(zmq_bind(f->done_pull, ep), 0);
    pk_sched_exec exec;
    fake_exec_init(&f->st, &exec);
    f->st.max_per_gpu = per_gpu;
    f->st.kernel_ms_per_run = 3;
    pk_scheduler_opts o = {.zmq_ctx = f->zctx,
                           .done_endpoint = ep,
                           .compile_workers = compile_workers,
                           .n_gpus = n_gpus,
                           .queue_limit = queue_limit,
                           .jobs_per_gpu = per_gpu,
                           .gpu_mem_mb = mem_mb};
    for (int i = 0; i < n_gpus; i++)
        o.gpus[i] = 10 + i; /* device ids need not be slot indices */
    pk_error err;
    assert_int_equal(pk_scheduler_create_with_exec(&o, &exec, &f->s, &err), PK_OK);
    return f;
}

/* One job per GPU: the tests of exclusive scheduling. */
static fixture *start(int n_gpus, int compile_workers, int queue_limit) {
    return start_opts(n_gpus, compile_workers, queue_limit, 1, 0);
}

static pk_completion *next_done(fixture *f) {
    pk_completion *c = NULL;
    int n = zmq_recv(f->done_pull, &c, sizeof c, 0);
    assert_int_equal(n, (int)sizeof c);
    return c;
}

static void stop(fixture *f) {
    pk_scheduler_free(f->s);
    zmq_close(f->done_pull);
    zmq_ctx_term(f->zctx);
    free(f);
}

static uint64_t submit_ok(fixture *f, const fake_problem *p, const char *src) {
    uint64_t ticket = 0;
    pk_error err;
    int rc = pk_scheduler_submit(f->s, (const pk_problem *)p, src, NULL, NULL, &ticket, &err);
    if (rc)
        fail_msg("submit: %s", err.message);
    return ticket;
}

static void test_mixed_world_sizes(void **state) {
    fixture *f = start(8, 2, 0);
    fake_problem probs[] = {{1, 1, 300}, {2, 1, 500}, {4, 1, 800}, {8, 1, 400}, {2, 1, 200}};
    enum { N = 150 };
    for (int i = 0; i < N; i++)
        submit_ok(f, &probs[i % 5], "ok");
    unsigned char seen[N + 1] = {0};
    for (int i = 0; i < N; i++) {
        pk_completion *c = next_done(f);
        assert_int_equal(c->harness_rc, 0);
        assert_int_equal(c->result.status, PK_STATUS_CORRECT);
        assert_true(c->ticket >= 1 && c->ticket <= N);
        assert_int_equal(seen[c->ticket], 0);
        seen[c->ticket] = 1;
        fake_completion_free(c);
    }
    pk_scheduler_stats ss;
    pk_scheduler_get_stats(f->s, &ss);
    assert_int_equal(ss.done, N);
    assert_int_equal(ss.running + ss.queued_run + ss.queued_compile + ss.compiling, 0);
    assert_int_equal(ss.gpus_busy, 0);
    assert_int_equal(ss.gpus_total, 8);
    assert_true(ss.gpu_busy_ms > 0);
    assert_int_equal(f->st.double_booked, 0);
    assert_int_equal(f->st.wrong_width, 0);
    assert_int_equal(f->st.runs, N);
    stop(f);
}

/* 40 one-GPU jobs, then one 8-GPU job, then 60 more one-GPU jobs. Greedy allocation would
 * start the wide job after all narrow ones; FIFO with bounded backfill lets at most
 * max_bypass (default 4) later jobs start between the wide job's compile and its run (+2 for
 * later jobs already granted in the moment between its compile ending and its queueing). */
static void test_wide_job_not_starved(void **state) {
    fixture *f = start(8, 2, 0);
    fake_problem narrow = {1, 1, 3000}, wide = {8, 1, 1000};
    for (int i = 0; i < 40; i++)
        submit_ok(f, &narrow, "ok");
    uint64_t w = submit_ok(f, &wide, "ok");
    for (int i = 0; i < 60; i++)
        submit_ok(f, &narrow, "ok");
    for (int i = 0; i < 101; i++)
        fake_completion_free(next_done(f));
    int queued = f->st.compile_done_at[w], started = f->st.run_started_at[w];
    assert_true(queued > 0 && started > queued);
    int bypassed = 0;
    for (uint64_t t = w + 1; t <= 101; t++)
        bypassed += f->st.run_started_at[t] > queued && f->st.run_started_at[t] < started;
    assert_true(bypassed <= 4 + 2);
    assert_int_equal(f->st.double_booked, 0);
    stop(f);
}

static void test_overloaded_when_full(void **state) {
    fixture *f = start(2, 1, 3);
    fake_problem p = {1, 1, 100};
    fake_exec_set_gate(&f->st, 1);
    for (int i = 0; i < 3; i++)
        submit_ok(f, &p, "ok");
    pk_error err;
    uint64_t t;
    assert_int_equal(pk_scheduler_submit(f->s, (const pk_problem *)&p, "ok", NULL, NULL, &t, &err),
                     PK_ERR_OVERLOADED);
    assert_non_null(strstr(err.message, "overloaded"));
    fake_exec_set_gate(&f->st, 0);
    for (int i = 0; i < 3; i++)
        fake_completion_free(next_done(f));
    submit_ok(f, &p, "ok"); /* room again */
    fake_completion_free(next_done(f));
    pk_scheduler_stats ss;
    pk_scheduler_get_stats(f->s, &ss);
    assert_int_equal(ss.overloaded, 1);
    stop(f);
}

static void test_compile_error_and_harness_failure(void **state) {
    fixture *f = start(2, 1, 0);
    fake_problem p = {2, 1, 100};
    uint64_t t_cerr = submit_ok(f, &p, "cerr");
    uint64_t t_fail = submit_ok(f, &p, "hfail");
    for (int i = 0; i < 2; i++) {
        pk_completion *c = next_done(f);
        if (c->ticket == t_cerr) {
            assert_int_equal(c->harness_rc, 0);
            assert_int_equal(c->result.status, PK_STATUS_COMPILE_ERROR);
        } else {
            assert_int_equal(c->ticket, t_fail);
            assert_int_equal(c->harness_rc, PK_ERR_IO);
            assert_string_equal(c->error.message, "fake harness failure");
        }
        fake_completion_free(c);
    }
    assert_int_equal(f->st.runs, 0); /* neither reached a GPU */
    pk_scheduler_stats ss;
    pk_scheduler_get_stats(f->s, &ss);
    assert_int_equal(ss.harness_failures, 1);
    stop(f);
}

static void test_unsupported_and_host_problems(void **state) {
    fixture *f = start(2, 1, 0);
    fake_problem too_wide = {4, 1, 0}, host = {3, 0, 100};
    pk_error err;
    uint64_t t;
    assert_int_equal(
        pk_scheduler_submit(f->s, (const pk_problem *)&too_wide, "ok", NULL, NULL, &t, &err),
        PK_ERR_UNSUPPORTED);
    /* A host problem takes a host slot and no GPU, whatever its world size. */
    submit_ok(f, &host, "ok");
    pk_completion *c = next_done(f);
    assert_int_equal(c->result.status, PK_STATUS_CORRECT);
    assert_int_equal(c->result.world_size, 0);
    fake_completion_free(c);
    assert_int_equal(f->st.wrong_width, 0);
    stop(f);
}

typedef struct shutdown_args {
    pk_scheduler *s;
    int grace_ms;
    double took_ms;
} shutdown_args;

static void *shutdown_thread(void *arg) {
    shutdown_args *a = arg;
    double t0 = pk_now_ms();
    pk_scheduler_shutdown(a->s, a->grace_ms);
    a->took_ms = pk_now_ms() - t0;
    return NULL;
}

static void test_shutdown_cancels_queued(void **state) {
    fixture *f = start(2, 1, 0);
    fake_problem p = {1, 1, 100};
    fake_exec_set_gate(&f->st, 1);
    for (int i = 0; i < 5; i++)
        submit_ok(f, &p, "ok");
    pthread_t th;
    shutdown_args a = {f->s, 0, 0};
    pthread_create(&th, NULL, shutdown_thread, &a);
    usleep(50000);
    fake_exec_set_gate(&f->st, 0); /* the compile in progress finishes; nothing runs */
    pthread_join(th, NULL);
    for (int i = 0; i < 5; i++) {
        pk_completion *c = next_done(f);
        assert_int_equal(c->harness_rc, PK_ERR_BUSY);
        assert_int_equal(c->result.status, PK_STATUS_TIMEOUT);
        assert_non_null(strstr(c->result.reason, "shut down"));
        fake_completion_free(c);
    }
    assert_int_equal(f->st.runs, 0);
    pk_error err;
    uint64_t t;
    assert_int_equal(pk_scheduler_submit(f->s, (const pk_problem *)&p, "ok", NULL, NULL, &t, &err),
                     PK_ERR_BUSY);
    stop(f);
}

/* Waits until *field (under the fake's lock) reaches at least want; 0 on timeout. */
static int wait_for(fixture *f, const int *field, int want) {
    for (int t = 0; t < 5000; t += 2) {
        pthread_mutex_lock(&f->st.mu);
        int v = *field;
        pthread_mutex_unlock(&f->st.mu);
        if (v >= want)
            return 1;
        usleep(2000);
    }
    return 0;
}

static int warmed(fixture *f, uint64_t ticket) {
    pthread_mutex_lock(&f->st.mu);
    int v = f->st.warmed[ticket];
    pthread_mutex_unlock(&f->st.mu);
    return v;
}

/* Within the grace, jobs waiting for the compile worker and for the GPUs still compile and
 * run; shutdown returns as soon as they are done, not at the deadline. */
static void test_shutdown_grace_lets_queued_work_finish(void **state) {
    fixture *f = start(1, 1, 0);
    fake_problem p = {1, 1, 20000};
    fake_exec_set_gate(&f->st, 1);
    for (int i = 0; i < 5; i++)
        submit_ok(f, &p, "ok");
    pthread_t th;
    shutdown_args a = {f->s, 20000, 0};
    pthread_create(&th, NULL, shutdown_thread, &a);
    usleep(50000);
    fake_exec_set_gate(&f->st, 0); /* compiles go on after the stop */
    pthread_join(th, NULL);
    for (int i = 0; i < 5; i++) {
        pk_completion *c = next_done(f);
        assert_int_equal(c->harness_rc, 0);
        assert_int_equal(c->result.status, PK_STATUS_CORRECT);
        fake_completion_free(c);
    }
    assert_int_equal(f->st.runs, 5);
    assert_true(a.took_ms < 10000);
    stop(f);
}

/* The grace ends while a job runs: it is not interrupted and delivers its verdict; the job
 * compiled and waiting for its GPU is cancelled, and nothing runs after the deadline. */
static void test_shutdown_after_grace_running_stage_finishes(void **state) {
    fixture *f = start(1, 1, 0);
    fake_problem slow = {1, 1, 400000}, quick = {1, 1, 100};
    uint64_t running = submit_ok(f, &slow, "ok");
    assert_true(wait_for(f, &f->st.runs, 1));
    uint64_t waiting = submit_ok(f, &quick, "ok");
    assert_true(wait_for(f, &f->st.compiles, 2)); /* compiled: now it waits for the GPU */
    pthread_t th;
    shutdown_args a = {f->s, 100, 0};
    pthread_create(&th, NULL, shutdown_thread, &a);
    pthread_join(th, NULL);
    for (int i = 0; i < 2; i++) {
        pk_completion *c = next_done(f);
        if (c->ticket == running) {
            assert_int_equal(c->harness_rc, 0);
            assert_int_equal(c->result.status, PK_STATUS_CORRECT);
        } else {
            assert_int_equal(c->ticket, waiting);
            assert_int_equal(c->harness_rc, PK_ERR_BUSY);
            assert_non_null(strstr(c->result.reason, "shut down"));
        }
        fake_completion_free(c);
    }
    assert_int_equal(f->st.runs, 1);
    assert_true(a.took_ms >= 200); /* it waited for the running stage */
    stop(f);
}

/* Idle GPUs, nobody waiting: the compiling job gets its GPUs early and runs on them. */
static void test_pregrant_warms_while_compiling(void **state) {
    fixture *f = start(2, 2, 0);
    fake_problem p = {2, 1, 1000};
    fake_exec_set_hold(&f->st, 1);
    uint64_t t = submit_ok(f, &p, "hold");
    assert_true(wait_for(f, &f->st.warms, 1));
    pk_scheduler_stats ss;
    pk_scheduler_get_stats(f->s, &ss);
    assert_int_equal(ss.pregranted, 1);
    assert_int_equal(ss.gpus_busy, 2);
    assert_int_equal(ss.compiling, 1);
    assert_int_equal(warmed(f, t), 1);
    fake_exec_set_hold(&f->st, 0);
    pk_completion *c = next_done(f);
    assert_int_equal(c->ticket, t);
    assert_int_equal(c->result.status, PK_STATUS_CORRECT);
    fake_completion_free(c);
    assert_int_equal(f->st.warm_ran, 1);
    assert_int_equal(f->st.warm_mismatch, 0);
    assert_int_equal(f->st.double_booked, 0);
    pk_scheduler_get_stats(f->s, &ss);
    assert_int_equal(ss.gpus_busy, 0);
    stop(f);
}

/* Two jobs compiling, GPUs for one: only the older is pre-granted. */
static void test_pregrant_oldest_only(void **state) {
    fixture *f = start(2, 2, 0);
    fake_problem p = {2, 1, 1000};
    fake_exec_set_hold(&f->st, 1);
    uint64_t a = submit_ok(f, &p, "hold-a");
    uint64_t b = submit_ok(f, &p, "hold-b");
    assert_true(wait_for(f, &f->st.warms, 1));
    usleep(50000);
    assert_int_equal(warmed(f, a), 1);
    assert_int_equal(warmed(f, b), 0); /* its GPUs are not idle */
    fake_exec_set_hold(&f->st, 0);
    for (int i = 0; i < 2; i++) {
        pk_completion *c = next_done(f);
        assert_int_equal(c->result.status, PK_STATUS_CORRECT);
        fake_completion_free(c);
    }
    assert_int_equal(f->st.warm_mismatch, 0);
    assert_int_equal(f->st.double_booked, 0);
    stop(f);
}

/* A compiled job waits for 4 GPUs while 2 are busy: the 2 idle GPUs are not pre-granted to a
 * job still compiling (the waiting job keeps its claim on them). */
static void test_no_pregrant_while_compiled_job_waits(void **state) {
    fixture *f = start(4, 3, 0);
    fake_problem two_long = {2, 1, 400000}, four = {4, 1, 1000}, two = {2, 1, 1000};
    uint64_t a = submit_ok(f, &two_long, "ok-a");
    assert_true(wait_for(f, &f->st.runs, 1));
    uint64_t b = submit_ok(f, &four, "ok-b");
    assert_true(wait_for(f, &f->st.compile_done_at[b], 1));
    usleep(20000); /* b is queued for GPUs */
    fake_exec_set_hold(&f->st, 1);
    uint64_t c = submit_ok(f, &two, "hold-c");
    usleep(100000); /* c compiles (held) while a runs and b waits */
    pk_scheduler_stats ss;
    pk_scheduler_get_stats(f->s, &ss);
    assert_int_equal(ss.queued_run, 1);
    assert_int_equal(ss.compiling, 1);
    assert_int_equal(warmed(f, c), 0);
    assert_int_equal(f->st.run_started_at[b], 0);
    fake_exec_set_hold(&f->st, 0);
    for (int i = 0; i < 3; i++) {
        pk_completion *d = next_done(f);
        assert_int_equal(d->result.status, PK_STATUS_CORRECT);
        fake_completion_free(d);
    }
    assert_true(f->st.run_started_at[a] < f->st.run_started_at[b]);
    assert_int_equal(f->st.double_booked, 0);
    assert_int_equal(f->st.warm_mismatch, 0);
    stop(f);
}

/* A compile error after the pre-grant: the warm run is released and its GPUs serve the next. */
static void test_pregrant_compile_error_gives_gpus_back(void **state) {
    fixture *f = start(2, 2, 0);
    fake_problem p = {2, 1, 1000};
    fake_exec_set_hold(&f->st, 1);
    uint64_t a = submit_ok(f, &p, "hold-cerr");
    assert_true(wait_for(f, &f->st.warms, 1));
    uint64_t b = submit_ok(f, &p, "ok-b");
    fake_exec_set_hold(&f->st, 0);
    for (int i = 0; i < 2; i++) {
        pk_completion *c = next_done(f);
        assert_int_equal(c->result.status,
                         c->ticket == a ? PK_STATUS_COMPILE_ERROR : PK_STATUS_CORRECT);
        fake_completion_free(c);
    }
    assert_int_equal(f->st.warm_aborted, 1);
    assert_int_not_equal(f->st.run_started_at[b], 0);
    assert_int_equal(f->st.double_booked, 0);
    pk_scheduler_stats ss;
    pk_scheduler_get_stats(f->s, &ss);
    assert_int_equal(ss.gpus_busy, 0);
    stop(f);
}

/* Three jobs per GPU: 2-GPU jobs run three at a time, never four; the GPUs are held for
 * about the wall time (not three times it), and the kernel-busy time is what the runs
 * reported, apart from it. */
static void test_coresident_runs(void **state) {
    fixture *f = start_opts(2, 2, 0, 3, 0);
    fake_problem p = {2, 1, 100000};
    enum { N = 24 };
    double t0 = pk_now_ms();
    for (int i = 0; i < N; i++)
        submit_ok(f, &p, "ok");
    for (int i = 0; i < N; i++) {
        pk_completion *c = next_done(f);
        assert_int_equal(c->result.status, PK_STATUS_CORRECT);
        fake_completion_free(c);
    }
    double wall = pk_now_ms() - t0;
    assert_int_equal(f->st.double_booked, 0);
    assert_int_equal(f->st.peak_resident, 3);
    assert_int_equal(f->st.peak_running, 3);
    pk_scheduler_stats ss;
    pk_scheduler_get_stats(f->s, &ss);
    assert_int_equal(ss.jobs_per_gpu, 3);
    assert_int_equal(ss.peak_resident, 3);
    assert_int_equal(ss.resident_jobs, 0);
    assert_int_equal(ss.gpus_busy, 0);
    /* Held: at most wall x 2 GPUs (co-resident jobs do not add up), at least the runs'. */
    assert_true(ss.gpu_busy_ms <= 2 * wall + 1);
    assert_true(ss.gpu_busy_ms >= 2 * (N / 3) * 100.0);
    assert_true(ss.gpu_kernel_ms == N * 3.0 * 2);
    assert_true(ss.gpu_timing_ms == N * 1.5 * 2);
    stop(f);
}

/* Memory per GPU bounds co-residency below jobs_per_gpu: 40 MiB jobs, 100 MiB per GPU. */
static void test_memory_bounds_coresidency(void **state) {
    fixture *f = start_opts(2, 2, 0, 8, 100);
    f->st.mem_mb = 40;
    fake_problem p = {2, 1, 50000};
    for (int i = 0; i < 12; i++)
        submit_ok(f, &p, "ok");
    for (int i = 0; i < 12; i++)
        fake_completion_free(next_done(f));
    assert_int_equal(f->st.peak_resident, 2);
    pk_scheduler_stats ss;
    pk_scheduler_get_stats(f->s, &ss);
    assert_int_equal(ss.gpu_mem_mb, 100);
    assert_int_equal(ss.peak_resident, 2);
    stop(f);
}

/* With room for several jobs, every compiling job is warmed, not only the oldest. */
static void test_pregrant_every_job_with_room(void **state) {
    fixture *f = start_opts(2, 3, 0, 4, 0);
    fake_problem p = {2, 1, 1000};
    fake_exec_set_hold(&f->st, 1);
    uint64_t t[3];
    for (int i = 0; i < 3; i++)
        t[i] = submit_ok(f, &p, "hold");
    assert_true(wait_for(f, &f->st.warms, 3));
    for (int i = 0; i < 3; i++)
        assert_int_equal(warmed(f, t[i]), 1);
    pk_scheduler_stats ss;
    pk_scheduler_get_stats(f->s, &ss);
    assert_int_equal(ss.pregranted, 3);
    assert_int_equal(ss.resident_jobs, 3);
    assert_int_equal(ss.gpus_busy, 2);
    fake_exec_set_hold(&f->st, 0);
    for (int i = 0; i < 3; i++)
        fake_completion_free(next_done(f));
    assert_int_equal(f->st.warm_ran, 3);
    assert_int_equal(f->st.warm_mismatch, 0);
    assert_int_equal(f->st.double_booked, 0);
    stop(f);
}

/* A run that fails before the candidate (infra_error) runs once more, on other GPUs. */
static void test_infra_error_retried_on_other_gpus(void **state) {
    fixture *f = start(4, 1, 0);
    f->st.bad_gpus = 1ull << 10; /* slot 0, the first a lone job gets */
    fake_problem p = {1, 1, 100};
    uint64_t t = submit_ok(f, &p, "ok");
    pk_completion *c = next_done(f);
    assert_int_equal(c->harness_rc, 0);
    assert_int_equal(c->result.status, PK_STATUS_CORRECT);
    fake_completion_free(c);
    assert_int_equal(f->st.run_count[t], 2);
    assert_int_equal(f->st.run_mask[t][0], 1ull << 10);
    assert_int_equal(f->st.run_mask[t][1] & (1ull << 10), 0);
    pk_scheduler_stats ss;
    pk_scheduler_get_stats(f->s, &ss);
    assert_int_equal(ss.infra_errors, 1);
    assert_int_equal(ss.infra_retries, 1);
    assert_int_equal(ss.infra_failed, 0);
    assert_int_equal(ss.n_gpus_removed, 0);
    stop(f);
}

/* Twice: no verdict, PK_ERR_INFRA naming both causes (the server answers infra_error). */
static void test_infra_error_twice_is_no_verdict(void **state) {
    fixture *f = start(2, 1, 0);
    f->st.bad_gpus = 3ull << 10; /* every GPU */
    fake_problem p = {2, 1, 100};
    uint64_t t = submit_ok(f, &p, "ok");
    pk_completion *c = next_done(f);
    assert_int_equal(c->harness_rc, PK_ERR_INFRA);
    assert_non_null(strstr(c->error.message, "failed twice before the candidate"));
    assert_non_null(strstr(c->error.message, "first on GPUs 10,11"));
    assert_non_null(strstr(c->error.message, "device setup failed: fake"));
    fake_completion_free(c);
    assert_int_equal(f->st.run_count[t], 2);
    pk_scheduler_stats ss;
    pk_scheduler_get_stats(f->s, &ss);
    assert_int_equal(ss.infra_errors, 2);
    assert_int_equal(ss.infra_retries, 1);
    assert_int_equal(ss.infra_failed, 1);
    stop(f);
}

/* A GPU whose runs keep failing before the candidate leaves the pool after 3 in a row; jobs
 * then run on the others, and a job wider than what is left gets PK_ERR_INFRA. */
static void test_failing_gpu_leaves_the_pool(void **state) {
    fixture *f = start(2, 1, 0);
    f->st.bad_gpus = 1ull << 10;
    fake_problem one = {1, 1, 100}, two = {2, 1, 100};
    for (int i = 0; i < 3; i++) {
        uint64_t t = submit_ok(f, &one, "ok");
        pk_completion *c = next_done(f);
        assert_int_equal(c->harness_rc, 0);
        assert_int_equal(c->result.status, PK_STATUS_CORRECT);
        fake_completion_free(c);
        assert_int_equal(f->st.run_count[t], 2); /* GPU 10, then GPU 11 */
    }
    pk_scheduler_stats ss;
    pk_scheduler_get_stats(f->s, &ss);
    assert_int_equal(ss.n_gpus_removed, 1);
    assert_int_equal(ss.gpus_removed[0], 10);
    uint64_t t = submit_ok(f, &one, "ok");
    pk_completion *c = next_done(f);
    assert_int_equal(c->result.status, PK_STATUS_CORRECT);
    fake_completion_free(c);
    assert_int_equal(f->st.run_count[t], 1);
    assert_int_equal(f->st.run_mask[t][0], 1ull << 11);
    submit_ok(f, &two, "ok");
    c = next_done(f);
    assert_int_equal(c->harness_rc, PK_ERR_INFRA);
    assert_non_null(strstr(c->error.message, "1 of 2 are left"));
    fake_completion_free(c);
    stop(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mixed_world_sizes),
        cmocka_unit_test(test_wide_job_not_starved),
        cmocka_unit_test(test_overloaded_when_full),
        cmocka_unit_test(test_compile_error_and_harness_failure),
        cmocka_unit_test(test_unsupported_and_host_problems),
        cmocka_unit_test(test_shutdown_cancels_queued),
        cmocka_unit_test(test_shutdown_grace_lets_queued_work_finish),
        cmocka_unit_test(test_shutdown_after_grace_running_stage_finishes),
        cmocka_unit_test(test_pregrant_warms_while_compiling),
        cmocka_unit_test(test_pregrant_oldest_only),
        cmocka_unit_test(test_no_pregrant_while_compiled_job_waits),
        cmocka_unit_test(test_pregrant_compile_error_gives_gpus_back),
        cmocka_unit_test(test_coresident_runs),
        cmocka_unit_test(test_memory_bounds_coresidency),
        cmocka_unit_test(test_pregrant_every_job_with_room),
        cmocka_unit_test(test_infra_error_retried_on_other_gpus),
        cmocka_unit_test(test_infra_error_twice_is_no_verdict),
        cmocka_unit_test(test_failing_gpu_leaves_the_pool),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
