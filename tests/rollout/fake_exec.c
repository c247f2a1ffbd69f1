/* The test executor (see fake_exec.h). Sources: "ok..." runs and is correct, "cerr" anywhere
 * is a compile error, "hfail..." makes the harness itself fail, "hold..." compiles only while
 * the hold gate is open. */
#include "fake_exec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int describe(void *ctx, const pk_problem *p, int *world, int *needs_gpu, pk_error *err) {
    const fake_problem *fp = (const fake_problem *)p;
    *world = fp->world_size;
    *needs_gpu = fp->needs_gpu;
    return PK_OK;
}

static long device_mb(void *ctx, const pk_problem *p, int world) {
    return ((const fake_stats *)ctx)->mem_mb;
}

static int compile(void *ctx, pk_sched_task *t) {
    fake_stats *st = ctx;
    pthread_mutex_lock(&st->mu);
    t->state = malloc(1);
    while (st->gate_closed || (st->hold_closed && strncmp(t->source, "hold", 4) == 0))
        pthread_cond_wait(&st->cv, &st->mu);
    st->compiles++;
    t->compile_over = 1; /* under the lock warm takes */
    pthread_mutex_unlock(&st->mu);
    if (strncmp(t->source, "hfail", 5) == 0)
        return pk_error_set(t->err, PK_ERR_IO, "fake harness failure");
    pthread_mutex_lock(&st->mu);
    if (t->ticket < 4096)
        st->compile_done_at[t->ticket] = ++st->clock;
    pthread_mutex_unlock(&st->mu);
    if (strstr(t->source, "cerr")) {
        t->res->status = PK_STATUS_COMPILE_ERROR;
        return PK_OK;
    }
    t->run_needed = 1;
    return PK_OK;
}

static uint64_t mask_of(const int *gpus, int n) {
    uint64_t m = 0;
    for (int i = 0; i < n; i++)
        m |= 1ull << (gpus[i] & 63);
    return m;
}

/* Under st->mu: jobs on the GPUs of mask change by delta; more than allowed is double booking. */
static void hold(fake_stats *st, uint64_t mask, int delta) {
    int cap = st->max_per_gpu ? st->max_per_gpu : 1;
    for (int g = 0; g < 64; g++)
        if (mask >> g & 1) {
            st->resident[g] += delta;
            if (st->resident[g] > cap)
                st->double_booked++;
            if (st->resident[g] > st->peak_resident)
                st->peak_resident = st->resident[g];
        }
}

static int run(void *ctx, pk_sched_task *t, const int *gpus, int n_gpus) {
    fake_stats *st = ctx;
    const fake_problem *fp = (const fake_problem *)t->problem;
    uint64_t mask = mask_of(gpus, n_gpus);
    pthread_mutex_lock(&st->mu);
    if (st->runs < 4096)
        st->run_order[st->runs] = t->ticket;
    if (t->ticket < 4096)
        st->run_started_at[t->ticket] = ++st->clock;
    st->runs++;
    if (n_gpus != (fp->needs_gpu ? fp->world_size : 0))
        st->wrong_width++;
    int infra = (mask & st->bad_gpus) != 0;
    if (t->ticket < 4096) {
        if (st->run_count[t->ticket] < 2)
            st->run_mask[t->ticket][st->run_count[t->ticket]] = mask;
        st->run_count[t->ticket]++;
    }
    if (t->ticket < 4096 && st->warmed[t->ticket] == 1) {
        st->warm_ran++;
        if (st->warm_mask[t->ticket] != mask)
            st->warm_mismatch++;
        st->warmed[t->ticket] = 2; /* ran: its GPUs are already counted */
    } else {
        hold(st, mask, 1);
    }
    if (++st->running_now > st->peak_running)
        st->peak_running = st->running_now;
    pthread_mutex_unlock(&st->mu);
    usleep((useconds_t)fp->run_us);
    pthread_mutex_lock(&st->mu);
    hold(st, mask, -1);
    st->running_now--;
    pthread_mutex_unlock(&st->mu);
    t->res->status = infra ? PK_STATUS_INFRA_ERROR : PK_STATUS_CORRECT;
    snprintf(t->res->reason, sizeof t->res->reason, "%s",
             infra ? "rank 0: device setup failed: fake" : "");
    t->res->world_size = n_gpus;
    t->res->stages.run_ms = fp->run_us / 1000.0;
    t->res->stages.run_check_ms = st->kernel_ms_per_run / 2;
    t->res->stages.run_timing_ms = st->kernel_ms_per_run / 2;
    return PK_OK;
}

static int warm(void *ctx, pk_sched_task *t, const int *gpus, int n_gpus) {
    fake_stats *st = ctx;
    int rc = PK_OK;
    pthread_mutex_lock(&st->mu);
    if (t->compile_over || t->ticket >= 4096) {
        rc = PK_ERR_BUSY;
    } else {
        st->warms++;
        st->warmed[t->ticket] = 1;
        st->warm_mask[t->ticket] = mask_of(gpus, n_gpus);
        hold(st, st->warm_mask[t->ticket], 1);
    }
    pthread_mutex_unlock(&st->mu);
    return rc;
}

static void release(void *ctx, pk_sched_task *t) {
    fake_stats *st = ctx;
    pthread_mutex_lock(&st->mu);
    if (t->ticket < 4096 && st->warmed[t->ticket] == 1) {
        st->warm_aborted++;
        st->warmed[t->ticket] = 3; /* aborted */
        hold(st, st->warm_mask[t->ticket], -1);
    }
    pthread_mutex_unlock(&st->mu);
    free(t->state);
    t->state = NULL;
}

void fake_completion_free(pk_completion *c) {
    free(c); /* the fake sets no owned strings in the result */
}

void fake_exec_init(fake_stats *st, pk_sched_exec *exec) {
    memset(st, 0, sizeof *st);
    pthread_mutex_init(&st->mu, NULL);
    pthread_cond_init(&st->cv, NULL);
    *exec = (pk_sched_exec){.ctx = st,
                            .describe = describe,
                            .compile = compile,
                            .run = run,
                            .release = release,
                            .warm = warm,
                            .device_mb = device_mb,
                            .free_completion = fake_completion_free};
}

void fake_exec_set_hold(fake_stats *st, int closed) {
    pthread_mutex_lock(&st->mu);
    st->hold_closed = closed;
    pthread_cond_broadcast(&st->cv);
    pthread_mutex_unlock(&st->mu);
}

void fake_exec_set_gate(fake_stats *st, int closed) {
    pthread_mutex_lock(&st->mu);
    st->gate_closed = closed;
    pthread_cond_broadcast(&st->cv);
    pthread_mutex_unlock(&st->mu);
}
