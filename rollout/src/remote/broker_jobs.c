/* The broker's jobs: placement, the shared baseline cache, results, losses and retries
 * (pk_broker_internal.h). Called on the broker's thread under mu. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zmq.h>

#include "pk_baseline_cache.h"
#include "pk_broker_internal.h"

static void free_job(pk_bjob *j) {
    free(j->source);
    free(j);
}

/* Hands c to the server (or frees it when it cannot be delivered). */
static void deliver(pk_broker *b, pk_completion *c) {
    b->in_flight--;
    b->stats.completed++;
    void *ptr = c;
    if (zmq_send(b->done_push, &ptr, sizeof ptr, 0) != (int)sizeof ptr) {
        fprintf(stderr, "pkgym serve: cannot deliver job %llu: %s\n", (unsigned long long)c->ticket,
                zmq_strerror(zmq_errno()));
        pk_completion_free(c);
    }
}

static pk_completion *new_completion(const pk_bjob *j) {
    pk_completion *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->ticket = j->ticket;
    c->user = j->user;
    pk_eval_result_init(&c->result);
    return c;
}

static void unlink_job(pk_broker *b, pk_bjob *j) {
    if (j->worker)
        pk_bjob_list_remove(&j->worker->jobs, j);
    else
        pk_bjob_list_remove(&b->queue, j);
    j->worker = NULL;
}

/* Completes j, in no list, with an error and no verdict, and frees it. */
static void fail_unlinked(pk_broker *b, pk_bjob *j, int rc, const char *msg) {
    pk_completion *c = new_completion(j);
    if (c) {
        c->harness_rc = pk_error_set(&c->error, rc, "%s", msg);
        /* No verdict: the server answers `internal` and records no turn. */
        c->result.status = PK_STATUS_RUNTIME_ERROR;
        snprintf(c->result.reason, sizeof c->result.reason, "%s", c->error.message);
        deliver(b, c);
    } else {
        b->in_flight--;
    }
    free_job(j);
}

void pk_broker_fail_job(pk_broker *b, pk_bjob *j, int rc, const char *fmt, ...) {
    unlink_job(b, j);
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fail_unlinked(b, j, rc, msg);
}

void pk_broker_job_lost(pk_broker *b, pk_bjob *j, const char *why) {
    int k = j->attempt - 1;
    if (k >= 0 && k < PK_BROKER_MAX_ATTEMPTS)
        snprintf(j->lost_on[k], sizeof j->lost_on[k], "%s", why);
    if (j->attempt >= PK_BROKER_MAX_ATTEMPTS) {
        char msg[512];
        b->stats.lost_twice++;
        snprintf(msg, sizeof msg,
                 "the evaluation was lost twice, no verdict: first %.200s; then %.200s. Send the "
                 "action again",
                 j->lost_on[0], j->lost_on[1]);
        fail_unlinked(b, j, PK_ERR_IO, msg);
        return;
    }
    b->stats.requeued++;
    j->t_unplaceable_ms = 0;
    pk_bjob_list_push_front(&b->queue, j);
}

/* The baseline cache key of j on w's hardware (the same key a local scheduler uses). */
static pk_baseline_key baseline_key(const pk_bjob *j, const pk_bworker *w) {
    return (pk_baseline_key){.problem_id = pk_problem_id(j->problem),
                             .meta_json = pk_problem_meta_json(j->problem),
                             .world_size = j->world,
                             .device = j->needs_gpu ? w->gpu_model : w->cpu_model,
                             .driver = j->needs_gpu ? w->driver : "host",
                             .nccl = w->nccl};
}

static int baseline_usable(const pk_broker *b, const pk_bjob *j) {
    return b->baseline_dir && j->kind == PK_JOB_EVAL && !j->opts.skip_timing &&
           !j->opts.reference_as_candidate;
}

static int send_job(pk_broker *b, pk_bjob *j, pk_bworker *w) {
    pk_wire_job wj;
    memset(&wj, 0, sizeof wj);
    wj.id = j->ticket;
    wj.attempt = j->attempt + 1;
    wj.kind = j->kind;
    wj.opts = j->opts;
    if (j->kind == PK_JOB_EVAL) {
        wj.problem = (char *)pk_problem_id(j->problem);
        wj.version = j->version;
        wj.source = j->source;
        pk_baseline_key k = baseline_key(j, w);
        pk_baseline_entry e;
        char why[160];
        /* A noisy or old entry is measured again by this job (and replaced, store_baseline). */
        if (baseline_usable(b, j) && !b->opts.remeasure_baseline && wj.opts.baseline_us <= 0 &&
            pk_baseline_cache_lookup(b->baseline_dir, &k, &e) &&
            !pk_baseline_stale(&e, pk_wall_time_s(), 0, 0, why, sizeof why)) {
            wj.opts.baseline_us = e.us;
            wj.opts.baseline_cv = e.cv;
            wj.opts.baseline_iters = e.iters;
            wj.opts.baseline_measured_at = e.measured_at;
            wj.baseline.us = e.us;
            snprintf(wj.baseline.device, sizeof wj.baseline.device, "%s", k.device);
            snprintf(wj.baseline.driver, sizeof wj.baseline.driver, "%s", k.driver);
            snprintf(wj.baseline.nccl, sizeof wj.baseline.nccl, "%s", k.nccl);
            wj.baseline.world = j->world;
            b->stats.baseline_hits++;
        }
    }
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    int rc = pk_wire_pack_job(&sb, &wj);
    if (rc == PK_OK)
        rc = pk_broker_send(b, w, &sb) == 0 ? PK_OK : PK_ERR_IO;
    msgpack_sbuffer_destroy(&sb);
    return rc;
}

static int available(const pk_bworker *w, double now) {
    return !w->draining && w->jobs.n < w->max_jobs && now >= w->refused_until_ms;
}

/* 1 when some connected worker able to run j has j's preferred GPU model. */
static int model_present(const pk_broker *b, const pk_bjob *j) {
    if (!j->gpu_model[0])
        return 0;
    for (const pk_bworker *w = b->workers; w; w = w->next)
        if (!w->draining && strcmp(w->gpu_model, j->gpu_model) == 0 &&
            pk_broker_worker_can_run(w, j))
            return 1;
    return 0;
}

/* The least loaded worker able to run j now; *able: some connected worker can run it. An
 * episode's GPU jobs keep to its GPU model while a worker of that model is connected. */
static pk_bworker *pick(pk_broker *b, const pk_bjob *j, double now, int *able) {
    pk_bworker *best = NULL;
    double best_load = 0;
    int same_model = model_present(b, j);
    *able = 0;
    for (pk_bworker *w = b->workers; w; w = w->next) {
        if (w->draining || !pk_broker_worker_can_run(w, j))
            continue;
        *able = 1;
        if (!available(w, now) || (same_model && strcmp(w->gpu_model, j->gpu_model) != 0))
            continue;
        double load = (double)w->jobs.n / w->max_jobs;
        /* Ties (e.g. idle workers) go to the one that has done the fewest jobs. */
        if (!best || load < best_load || (load == best_load && w->done < best->done)) {
            best = w;
            best_load = load;
        }
    }
    return best;
}

void pk_broker_dispatch(pk_broker *b) {
    double now = pk_now_ms();
    int any_free = 0;
    for (pk_bworker *w = b->workers; w && !any_free; w = w->next)
        any_free = available(w, now);
    pk_bjob *next;
    for (pk_bjob *j = b->queue.head; j && any_free; j = next) {
        next = j->next;
        int able = 0;
        pk_bworker *w = pick(b, j, now, &able);
        if (!able && !j->t_unplaceable_ms)
            j->t_unplaceable_ms = now;
        else if (able)
            j->t_unplaceable_ms = 0;
        if (!w)
            continue;
        pk_bjob_list_remove(&b->queue, j);
        if (send_job(b, j, w) != PK_OK) {
            pk_bjob_list_push_front(&b->queue, j);
            pk_broker_remove_worker(b, w, "lost", "disconnected (unreachable)");
            return; /* the lists changed under us: the next round goes on */
        }
        j->attempt++;
        j->t_dispatch_ms = now;
        j->worker = w;
        pk_bjob_list_push_back(&w->jobs, j);
        any_free = 0;
        for (pk_bworker *x = b->workers; x && !any_free; x = x->next)
            any_free = available(x, now);
    }
    b->stats.queued = b->queue.n;
}

/* Why no connected worker can run j, for the client. */
static void why_unplaceable(const pk_broker *b, const pk_bjob *j, char *out, size_t cap) {
    int n = 0;
    size_t used = 0;
    const char *pid = pk_problem_id(j->problem);
    for (pk_bworker *w = b->workers; w && used < cap; w = w->next, n++) {
        const char *v = json_string_value(json_object_get(w->problems, pid));
        char why[200];
        if (!v)
            snprintf(why, sizeof why, "lacks the problem or its module");
        else if (strcmp(v, j->version) != 0)
            snprintf(why, sizeof why, "has version %s", v);
        else if (j->needs_gpu)
            snprintf(why, sizeof why, "largest NVLink domain has %d GPU(s)", w->max_world);
        else
            snprintf(why, sizeof why, "has no host slot%s", w->draining ? " (draining)" : "");
        used += (size_t)snprintf(out + used, cap - used, "%s%s %s", n ? "; " : ": ", w->name, why);
    }
    if (n == 0)
        snprintf(out, cap, ": no worker is connected");
}

void pk_broker_expire_unplaceable(pk_broker *b, double now) {
    double limit = b->opts.worker_wait_s * 1000.0;
    pk_bjob *next;
    for (pk_bjob *j = b->queue.head; j; j = next) {
        next = j->next;
        if (!j->t_unplaceable_ms) {
            int able = 0;
            pick(b, j, now, &able);
            if (!able)
                j->t_unplaceable_ms = now;
            continue;
        }
        if (now - j->t_unplaceable_ms < limit)
            continue;
        char why[400];
        if (j->kind == PK_JOB_NOOP)
            snprintf(why, sizeof why, ": no worker is connected");
        else
            why_unplaceable(b, j, why, sizeof why);
        b->stats.no_worker++;
        char needs[96];
        if (j->kind == PK_JOB_NOOP)
            snprintf(needs, sizeof needs, "any worker");
        else if (j->needs_gpu)
            snprintf(needs, sizeof needs, "%d GPU(s) in one NVLink domain", j->world);
        else
            snprintf(needs, sizeof needs, "a host slot");
        pk_broker_fail_job(b, j, PK_ERR_UNSUPPORTED,
                           "no connected worker could run '%s' (needs %s and version %s of the "
                           "problem) for %.0f s%s",
                           j->kind == PK_JOB_NOOP ? "no-op" : pk_problem_id(j->problem), needs,
                           j->kind == PK_JOB_NOOP ? "-" : j->version, b->opts.worker_wait_s, why);
    }
}

void pk_broker_cancel_all(pk_broker *b, const char *which) {
    if (strcmp(which, "queued") == 0) {
        while (b->queue.head)
            pk_broker_fail_job(b, b->queue.head, PK_ERR_BUSY,
                               "the server shut down before this job reached a worker");
        return;
    }
    for (pk_bworker *w = b->workers; w; w = w->next)
        while (w->jobs.head)
            pk_broker_fail_job(b, w->jobs.head, PK_ERR_BUSY,
                               "the server shut down before worker %s returned this job's result",
                               w->name);
}

static pk_bjob *find_job(pk_bworker *w, uint64_t id) {
    for (pk_bjob *j = w->jobs.head; j; j = j->next)
        if (j->ticket == id)
            return j;
    return NULL;
}

static void store_baseline(pk_broker *b, const pk_bjob *j, const pk_bworker *w,
                           const pk_wire_baseline *rep, const pk_eval_result *res) {
    if (!baseline_usable(b, j) || !(rep->us > 0) || j->opts.baseline_us > 0)
        return;
    pk_baseline_key k = baseline_key(j, w);
    /* The worker's own view of its hardware must be the one the key names. */
    if (strcmp(rep->device, k.device) || strcmp(rep->driver, k.driver) ||
        strcmp(rep->nccl, k.nccl) || rep->world != j->world)
        return;
    pk_baseline_entry cached;
    char why[160];
    /* A fresh entry stays (every worker of this model uses it); a stale one is replaced. */
    if (!b->opts.remeasure_baseline && pk_baseline_cache_lookup(b->baseline_dir, &k, &cached) &&
        !pk_baseline_stale(&cached, pk_wall_time_s(), 0, 0, why, sizeof why))
        return;
    pk_baseline_entry e = {rep->us, res->baseline.cv, res->baseline.iters,
                           res->baseline.measured_at > 0 ? res->baseline.measured_at
                                                         : pk_wall_time_s()};
    if (e.cv > PK_BASELINE_DEFAULT_MAX_CV)
        return; /* too noisy to serve other steps */
    pk_error err;
    if (pk_baseline_cache_store(b->baseline_dir, &k, &e, &err) == PK_OK)
        b->stats.baseline_stored++;
}

void pk_broker_on_result(pk_broker *b, pk_bworker *w, const msgpack_object *msg) {
    pk_wire_result r;
    pk_error err;
    if (pk_wire_unpack_result(msg, &r, &err) != PK_OK) {
        fprintf(stderr, "pkgym serve: worker %s sent a bad result: %s\n", w->name, err.message);
        pk_wire_result_free(&r);
        return;
    }
    pk_bjob *j = find_job(w, r.id);
    if (!j || r.attempt != j->attempt) {
        b->stats.stale_results++; /* not (or no longer) this session's job */
        pk_wire_result_free(&r);
        return;
    }
    if (r.code == PK_WIRE_REFUSED) {
        /* Not an attempt: back to the front, and this worker gets nothing for a while. */
        pk_bjob_list_remove(&w->jobs, j);
        j->worker = NULL;
        j->attempt--;
        pk_bjob_list_push_front(&b->queue, j);
        w->refused_until_ms = pk_now_ms() + b->opts.heartbeat_ms;
        pk_wire_result_free(&r);
        return;
    }
    w->done++;
    if (r.code != PK_WIRE_OK) {
        pk_broker_fail_job(b, j,
                           r.code == PK_WIRE_HARNESS_ERROR ? PK_ERR_INTERNAL : PK_ERR_UNSUPPORTED,
                           "%s", r.message);
        pk_wire_result_free(&r);
        return;
    }
    unlink_job(b, j);
    pk_completion *c = new_completion(j);
    if (!c) {
        b->in_flight--;
    } else if (j->kind == PK_JOB_NOOP) {
        /* Never a verdict, whatever the worker sent: a no-op can never be scored. */
        c->harness_rc = pk_error_set(&c->error, PK_ERR_UNSUPPORTED, "no-op job (bench)");
        deliver(b, c);
    } else {
        store_baseline(b, j, w, &r.baseline, &r.result);
        pk_eval_result_free(&c->result);
        c->result = r.result; /* moved */
        pk_eval_result_init(&r.result);
        deliver(b, c);
    }
    pk_wire_result_free(&r);
    free_job(j);
}
