/* The local scheduler or the broker with its in-process worker (evaluator.h). */
#include "evaluator.h"

#include <stdio.h>
#include <string.h>

static void *local_worker_main(void *arg) {
    pk_evaluator *ev = arg;
    if (pk_worker_run(&ev->local_opts, &ev->local_stop, &ev->local_err) != PK_OK)
        fprintf(stderr, "pkgym serve: the local worker did not start: %s\n", ev->local_err.message);
    return NULL;
}

static int start_broker(pk_evaluator *ev, const pk_evaluator_opts *o, pk_error *err) {
    pk_broker_opts bo;
    memset(&bo, 0, sizeof bo);
    bo.zmq_ctx = o->zmq_ctx;
    bo.done_endpoint = o->done_endpoint;
    for (int i = 0; i < o->n_worker_binds && bo.n_binds < PK_BROKER_MAX_BINDS - 1; i++)
        bo.binds[bo.n_binds++] = o->worker_binds[i];
    int local = o->n_gpus != 0; /* --gpus none: a pure broker */
    snprintf(ev->local_ep, sizeof ev->local_ep, "inproc://pkgym-local-worker-%p", (void *)ev);
    if (local)
        bo.binds[bo.n_binds++] = ev->local_ep;
    bo.heartbeat_ms = o->heartbeat_ms;
    bo.liveness = o->liveness;
    bo.queue_limit = o->queue_limit;
    bo.worker_wait_s = o->worker_wait_s;
    bo.cache_dir = o->cache_dir;
    bo.curve = o->worker_curve;
    bo.insecure = o->insecure;
    ev->local_gpus = -1;
    int rc = pk_broker_create(&bo, &ev->broker, err);
    if (rc || !local)
        return rc;
    pk_worker_opts *w = &ev->local_opts;
    pk_worker_opts_default(w);
    w->connect = ev->local_ep;
    w->zmq_ctx = o->zmq_ctx;
    w->problems_dir = o->problems_dir;
    w->modules_dir = o->modules_dir;
    w->data_dir = o->data_dir;
    w->compile_workers = o->compile_workers;
    w->name = "local";
    w->heartbeat_ms = o->heartbeat_ms;
    if (o->liveness)
        w->liveness = o->liveness;
    w->grace_ms = 0; /* it stops after the broker, which has given every job its grace */
    if (o->n_gpus > 0) {
        size_t used = 0;
        for (int i = 0; i < o->n_gpus && used < sizeof ev->local_gpu_list - 8; i++)
            used += (size_t)snprintf(ev->local_gpu_list + used, sizeof ev->local_gpu_list - used,
                                     "%s%d", i ? "," : "", o->gpus[i]);
        w->gpus = ev->local_gpu_list;
    }
    if (pthread_create(&ev->local_thread, NULL, local_worker_main, ev) != 0)
        return pk_error_set(err, PK_ERR_SYSTEM, "cannot start the local worker thread");
    ev->local_started = 1;
    return PK_OK;
}

int pk_evaluator_start(pk_evaluator *ev, const pk_evaluator_opts *o, pk_error *err) {
    memset(ev, 0, sizeof *ev);
    if (o->n_worker_binds > 0)
        return start_broker(ev, o, err);
    pk_scheduler_opts so;
    memset(&so, 0, sizeof so);
    so.zmq_ctx = o->zmq_ctx;
    so.done_endpoint = o->done_endpoint;
    so.compile_workers = o->compile_workers;
    so.queue_limit = o->queue_limit;
    int n = o->n_gpus;
    if (n < 0) {
        n = o->n_nvml_gpus > PK_SCHED_MAX_GPUS ? PK_SCHED_MAX_GPUS : o->n_nvml_gpus;
        for (int i = 0; i < n; i++)
            so.gpus[i] = i;
    } else {
        memcpy(so.gpus, o->gpus, (size_t)n * sizeof *o->gpus);
    }
    so.n_gpus = n;
    so.jobs_per_gpu = o->jobs_per_gpu;
    so.rank_visibility = o->rank_visibility;
    so.gpu_mem_mb = o->gpu_mem_mb;
    so.cache_dir = o->cache_dir;
    so.remeasure_baseline = o->remeasure_baseline;
    so.baseline_max_cv = o->baseline_max_cv;
    so.baseline_max_age_s = o->baseline_max_age_s;
    ev->local_gpus = n;
    return pk_scheduler_create(&so, &ev->sched, err);
}

int pk_evaluator_submit(pk_evaluator *ev, const pk_problem *p, const char *source,
                        const pk_eval_opts *opts, const char *gpu_model, void *user,
                        uint64_t *ticket, pk_error *err) {
    if (ev->broker)
        return pk_broker_submit(ev->broker, p, source, opts, gpu_model, user, ticket, err);
    return pk_scheduler_submit(ev->sched, p, source, opts, user, ticket, err);
}

static int load_int(const json_t *load, const char *key) {
    return (int)json_integer_value(json_object_get(load, key));
}

void pk_evaluator_stats(pk_evaluator *ev, pk_scheduler_stats *out) {
    memset(out, 0, sizeof *out);
    if (ev->sched) {
        pk_scheduler_get_stats(ev->sched, out);
        return;
    }
    if (!ev->broker)
        return;
    pk_broker_stats bs;
    pk_broker_get_stats(ev->broker, &bs);
    out->queued_compile = bs.queued; /* waiting for a worker: counted as queued */
    out->gpus_total = bs.gpus;
    out->done = bs.completed;
    out->overloaded = bs.overloaded;
    out->baseline_cache_hits = bs.baseline_hits;
    json_t *workers = pk_broker_workers_json(ev->broker);
    size_t i;
    json_t *w;
    json_array_foreach(workers, i, w) {
        json_t *load = json_object_get(w, "load");
        if (json_object_get(w, "departed_at") || !load)
            continue;
        out->queued_compile += load_int(load, "queued");
        out->compiling += load_int(load, "compiling");
        out->running += load_int(load, "running");
        out->gpus_busy += load_int(load, "gpus_busy");
        out->gpu_busy_ms += json_number_value(json_object_get(load, "gpu_busy_ms"));
        out->gpu_kernel_ms += json_number_value(json_object_get(load, "gpu_kernel_ms"));
        out->gpu_timing_ms += json_number_value(json_object_get(load, "gpu_timing_ms"));
        out->resident_jobs += load_int(load, "resident_jobs");
        out->compile_cache_hits += (uint64_t)load_int(load, "compile_hits");
        out->compile_cache_misses += (uint64_t)load_int(load, "compile_misses");
    }
    json_decref(workers);
}

json_t *pk_evaluator_stats_json(pk_evaluator *ev) {
    if (!ev->broker)
        return NULL;
    pk_broker_stats b;
    pk_broker_get_stats(ev->broker, &b);
    json_t *broker = json_pack(
        "{s:i, s:i, s:i, s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f, s:b, "
        "s:I, s:I}",
        "workers", b.workers, "gpus", b.gpus, "queued", b.queued, "dispatched", b.dispatched,
        "submitted", (json_int_t)b.submitted, "completed", (json_int_t)b.completed, "requeued",
        (json_int_t)b.requeued, "lost_twice", (json_int_t)b.lost_twice, "no_worker",
        (json_int_t)b.no_worker, "stale_results", (json_int_t)b.stale_results, "workers_joined",
        (json_int_t)b.workers_joined, "workers_lost", (json_int_t)b.workers_lost, "workers_left",
        (json_int_t)b.workers_left, "baseline_hits", (json_int_t)b.baseline_hits, "baseline_stored",
        (json_int_t)b.baseline_stored, "dispatch_ms_max", b.dispatch_ms_max, "curve", b.curve,
        "workers_refused", (json_int_t)b.workers_refused, "handshakes_failed",
        (json_int_t)b.handshakes_failed);
    return json_pack("{s:o, s:o}", "broker", broker, "workers", pk_broker_workers_json(ev->broker));
}

void pk_evaluator_shutdown(pk_evaluator *ev, int grace_ms) {
    if (ev->sched)
        pk_scheduler_shutdown(ev->sched, grace_ms);
    if (ev->broker)
        pk_broker_shutdown(ev->broker, grace_ms);
    if (ev->local_started) {
        ev->local_stop = 1;
        pthread_join(ev->local_thread, NULL);
        ev->local_started = 0;
    }
}

void pk_evaluator_free(pk_evaluator *ev) {
    pk_evaluator_shutdown(ev, 0);
    pk_scheduler_free(ev->sched);
    pk_broker_free(ev->broker);
    memset(ev, 0, sizeof *ev);
}
