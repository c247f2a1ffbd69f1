/* The run watcher (pk_job_watch.h): phase budgets for runs that hold GPU locks, and credit
 * for the time they wait for other jobs' locks. */
#define _GNU_SOURCE
#include "pk_job_watch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pk_common.h"

/* Calls inside the exclusive phase, both sides: a warm-up chunk, the timed calls (the plan
 * draws up to 1.25 x iters) and one reference run per verified call (at most 96 per block and
 * one per call; never counted below the 192 of two full blocks). */
#define WARM_CHUNK 16
#define MAX_VERIFIED_PER_BLOCK 96
#define MIN_VERIFIED_COUNTED 192

void pk_phase_track_init(pk_phase_track *t, const pk_problem *p, int run_limit_ms) {
    memset(t, 0, sizeof *t);
    t->run_limit_ms = run_limit_ms;
    t->warmup_ms = p ? p->warmup_ms : 0;
    int iters = p ? p->iters : 0, calls = (iters * 5 + 3) / 4;
    int blocks = p && p->timing_blocks > 0 ? p->timing_blocks : 2;
    int verified =
        blocks * MAX_VERIFIED_PER_BLOCK < calls ? blocks * MAX_VERIFIED_PER_BLOCK : calls;
    if (verified < MIN_VERIFIED_COUNTED)
        verified = MIN_VERIFIED_COUNTED;
    t->exclusive_calls = 2 * (WARM_CHUNK + calls) + verified;
}

int pk_lock_marker_parse(const char *text, pk_lock_marker *m) {
    static const char *names[] = {"none",           "wait-shared", "shared",
                                  "wait-exclusive", "exclusive",   "setup"};
    char word[32];
    memset(m, 0, sizeof *m);
    int n = text ? sscanf(text, "%u %31s %lf %lf %lf %lf", &m->seq, word, &m->since_ms,
                          &m->longest_shared_ms, &m->waited_ms, &m->expect_ms)
                 : 0;
    if (n != 2 && n != 5 && n != 6)
        return -1;
    m->full = n >= 5 && m->since_ms >= 0 && m->longest_shared_ms >= 0 && m->waited_ms >= 0 &&
              m->expect_ms >= 0 && m->expect_ms < 1e12;
    if (!m->full)
        m->expect_ms = 0;
    for (int i = 0; i < (int)(sizeof names / sizeof *names); i++)
        if (!strcmp(word, names[i])) {
            m->state = i;
            return 0;
        }
    return -1;
}

static int waiting(int state) {
    return state == PK_LOCK_STATE_WAIT_SHARED || state == PK_LOCK_STATE_WAIT_EXCLUSIVE;
}

void pk_phase_track_observe(pk_phase_track *t, const pk_lock_marker *m, double now) {
    if (m->seq != t->seq || m->state != t->state) {
        /* A phase ended: the longest shared phase scales the next budgets. */
        if (t->state == PK_LOCK_STATE_SHARED && t->phase_start > 0 &&
            now - t->phase_start > t->longest_shared_ms && !m->full)
            t->longest_shared_ms = now - t->phase_start;
        if (waiting(t->state) && t->phase_start > 0 && !m->full)
            t->waited_before += now - t->phase_start;
        t->seq = m->seq;
        t->state = m->state;
        /* The runner's clock when it has one (never ahead of ours), else when we saw it. */
        t->phase_start = m->full && m->since_ms > 0 && m->since_ms <= now ? m->since_ms : now;
    }
    if (m->full && m->longest_shared_ms > t->longest_shared_ms)
        t->longest_shared_ms = m->longest_shared_ms;
    if (m->full)
        t->expect_ms = m->expect_ms;
    double current = waiting(t->state) ? now - t->phase_start : 0;
    double before = m->full ? m->waited_ms : t->waited_before;
    t->waited_ms = before + current;
    t->last_tick = now;
}

static int floor_ms(const pk_phase_track *t) {
    int quarter = t->run_limit_ms / 4;
    return quarter < PK_PHASE_FLOOR_MS ? quarter : PK_PHASE_FLOOR_MS;
}

int pk_phase_budget_ms(const pk_phase_track *t, int exclusive) {
    double want;
    if (exclusive && t->expect_ms > 0) { /* the runner's estimate from its trials' pace */
        want = PK_EXPECT_FACTOR * t->expect_ms + PK_EXPECT_SLACK_MS;
        double lo = PK_EXPECT_FLOOR_MS, hi = t->run_limit_ms;
        return (int)(want < lo ? lo : want > hi ? hi : want);
    }
    if (exclusive) /* no estimate: warm-up of both sides plus every call at a whole trial's pace */
        want = PK_PHASE_EXCLUSIVE_FACTOR *
               (2 * t->warmup_ms + t->exclusive_calls * t->longest_shared_ms);
    else
        want = PK_PHASE_SHARED_FACTOR * t->longest_shared_ms;
    double lo = floor_ms(t), hi = t->run_limit_ms;
    return (int)(want < lo ? lo : want > hi ? hi : want);
}

double pk_phase_track_deadline(const pk_phase_track *t, double base_start, int *bound) {
    double d = 0;
    *bound = PK_BOUND_NONE;
    if (base_start > 0) {
        double credit = t->waited_ms < t->run_limit_ms ? t->waited_ms : t->run_limit_ms;
        d = base_start + t->run_limit_ms + credit;
        *bound = PK_BOUND_RUN;
    }
    int excl = t->state == PK_LOCK_STATE_EXCLUSIVE;
    if (excl || t->state == PK_LOCK_STATE_SHARED) {
        double p = t->phase_start + pk_phase_budget_ms(t, excl);
        if (d <= 0 || p < d) {
            d = p;
            *bound = excl ? PK_BOUND_EXCLUSIVE : PK_BOUND_SHARED;
        }
    }
    return d;
}

/* Under w->mu. */
static void store(pk_run_watch *w) {
    int bound = PK_BOUND_ABORT;
    double d = w->abort_at;
    if (d <= 0)
        d = pk_phase_track_deadline(&w->track, w->base_start, &bound);
    w->bound = bound;
    w->stored = d;
    w->budget_ms = bound == PK_BOUND_SHARED || bound == PK_BOUND_EXCLUSIVE
                       ? pk_phase_budget_ms(&w->track, bound == PK_BOUND_EXCLUSIVE)
                       : 0;
    pk_deadline_store(w->deadline, d);
}

static void poll_marker(pk_run_watch *w) {
    char *text = NULL;
    size_t n = 0;
    pk_lock_marker m;
    double now = pk_now_ms();
    /* Untrusted: the work dir is the candidate's too (no links, no FIFOs, 128 bytes). */
    int have = pk_read_file_untrusted(w->marker, 128, &text, &n, NULL) == PK_OK &&
               pk_lock_marker_parse(text, &m) == 0;
    free(text);
    pthread_mutex_lock(&w->mu);
    if (have)
        pk_phase_track_observe(&w->track, &m, now);
    store(w);
    pthread_mutex_unlock(&w->mu);
}

static void *watch_main(void *arg) {
    pk_run_watch *w = arg;
    const struct timespec tick = {0, PK_WATCH_TICK_MS * 1000000L};
    for (;;) {
        pthread_mutex_lock(&w->mu);
        int stop = w->stop;
        pthread_mutex_unlock(&w->mu);
        if (stop)
            break;
        poll_marker(w);
        nanosleep(&tick, NULL);
    }
    return NULL;
}

int pk_run_watch_start(pk_run_watch *w, const pk_problem *p, int run_limit_ms, const char *job_dir,
                       int locked, double *deadline) {
    memset(w, 0, sizeof *w);
    pthread_mutex_init(&w->mu, NULL);
    w->deadline = deadline;
    w->locked = locked;
    pk_phase_track_init(&w->track, p, run_limit_ms);
    snprintf(w->marker, sizeof w->marker, "%s/locks", job_dir);
    if (locked && pthread_create(&w->thread, NULL, watch_main, w) != 0)
        return PK_ERR_SYSTEM; /* the caller runs without phase budgets (the wall limit stays) */
    w->started = locked;
    return PK_OK;
}

void pk_run_watch_set_base(pk_run_watch *w, double base_start) {
    pthread_mutex_lock(&w->mu);
    w->base_start = base_start;
    store(w);
    pthread_mutex_unlock(&w->mu);
}

void pk_run_watch_abort(pk_run_watch *w, double at) {
    pthread_mutex_lock(&w->mu);
    w->abort_at = at > 0 ? at : 1e-3; /* > 0: "now" */
    store(w);
    pthread_mutex_unlock(&w->mu);
}

void pk_run_watch_stop(pk_run_watch *w) {
    if (w->started) {
        pthread_mutex_lock(&w->mu);
        w->stop = 1;
        pthread_mutex_unlock(&w->mu);
        pthread_join(w->thread, NULL);
        w->started = 0;
    }
}

double pk_run_watch_expect_ms(pk_run_watch *w) {
    pthread_mutex_lock(&w->mu);
    double e = w->track.expect_ms;
    pthread_mutex_unlock(&w->mu);
    return e;
}

int pk_run_watch_fired(pk_run_watch *w, double now, int *budget_ms, double *waited_ms) {
    pthread_mutex_lock(&w->mu);
    int bound = w->stored > 0 && now + PK_WATCH_TICK_MS >= w->stored ? w->bound : PK_BOUND_NONE;
    *budget_ms = w->budget_ms;
    double waited = w->track.waited_ms;
    *waited_ms = waited < w->track.run_limit_ms ? waited : w->track.run_limit_ms;
    pthread_mutex_unlock(&w->mu);
    return bound;
}
