/* The real executor: drives the harness's staged job API (create, compile or take the object
 * from the compile cache, run on the granted GPUs) and feeds cached reference times through
 * pk_eval_opts.baseline_us unless remeasure_baseline is set. pk_scheduler_create lives here
 * because it is what ties the scheduler to the harness. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_baseline_cache.h"
#include "pk_compile_cache.h"
#include "pk_host_info.h"
#include "pk_key_gate.h"
#include "pk_sched_exec.h"

typedef struct harness_exec {
    pk_compile_cache *compile_cache; /* NULL: no caching */
    char *baseline_dir;              /* NULL: no caching */
    int remeasure_baseline;
    double baseline_max_cv, baseline_max_age_s; /* > 0 (the defaults filled in) */
    pk_host_info host;
    pk_key_gate gate;        /* compile keys being compiled */
    pthread_mutex_t warm_mu; /* a task's job pointer and warm fields (warm vs compile) */
    char lock_dir[512];      /* every job's GPU timing locks */
    int rank_visibility;     /* pk_scheduler_opts.rank_visibility */
} harness_exec;

static int describe(void *ctx, const pk_problem *p, int *world, int *needs_gpu, pk_error *err) {
    *world = pk_problem_world_size(p);
    *needs_gpu = pk_problem_needs_gpu(p);
    return PK_OK;
}

static long device_mb(void *ctx, const pk_problem *p, int world) {
    return pk_job_device_mb(p, world);
}

static pk_baseline_key baseline_key(const harness_exec *h, const pk_sched_task *t) {
    int gpu = pk_problem_needs_gpu(t->problem);
    /* Nodes are assumed homogeneous: the first GPU's model stands for the job's GPUs. */
    /* The world size the job runs at: a per-episode one (options.check.world_size) has its
     * own baseline. */
    int world = t->opts.world_size > 0 ? t->opts.world_size
                : t->opts.n_gpus > 0   ? t->opts.n_gpus
                                       : pk_problem_world_size(t->problem);
    return (pk_baseline_key){.problem_id = pk_problem_id(t->problem),
                             .meta_json = pk_problem_meta_json(t->problem),
                             .world_size = world,
                             .device = gpu ? h->host.gpu_model : h->host.cpu_model,
                             .driver = gpu ? h->host.driver : "host",
                             .nccl = h->host.nccl};
}

static int baseline_usable(const harness_exec *h, const pk_sched_task *t) {
    return h->baseline_dir && !t->opts.skip_timing && !t->opts.reference_as_candidate;
}

static int compiled_ok(pk_job *job, const pk_eval_result *res) {
    const char *so = pk_job_object_path(job);
    return so && so[0] && res->status != PK_STATUS_COMPILE_ERROR &&
           res->status != PK_STATUS_REJECTED && res->status != PK_STATUS_FORMAT_ERROR;
}

/* The job exists: start a warm run that the scheduler asked for before it did. */
static void publish_job(harness_exec *h, pk_sched_task *t, pk_job *job) {
    pthread_mutex_lock(&h->warm_mu);
    t->state = job;
    if (t->warm_pending) {
        pk_error e; /* not warm: the run starts cold on the same GPUs */
        pk_job_warm(job, t->warm_gpus, t->n_warm_gpus, &e);
        t->warm_pending = 0;
    }
    pthread_mutex_unlock(&h->warm_mu);
}

static int compile_stage(harness_exec *h, pk_sched_task *t) {
    pk_eval_result_init(t->res);
    if (!t->opts.lock_dir) /* jobs share GPUs: timing holds them through the locks */
        t->opts.lock_dir = h->lock_dir;
    if (!t->opts.rank_visibility)
        t->opts.rank_visibility = h->rank_visibility;
    if (baseline_usable(h, t) && !h->remeasure_baseline && t->opts.baseline_us <= 0) {
        pk_baseline_key k = baseline_key(h, t);
        pk_baseline_entry b;
        char why[160];
        if (pk_baseline_cache_lookup(h->baseline_dir, &k, &b)) {
            /* A noisy or old baseline is measured again (and replaced) by this run. */
            if (pk_baseline_stale(&b, pk_wall_time_s(), h->baseline_max_cv, h->baseline_max_age_s,
                                  why, sizeof why)) {
                t->baseline_cache_stale = 1;
            } else {
                t->opts.baseline_us = b.us;
                t->opts.baseline_cv = b.cv;
                t->opts.baseline_iters = b.iters;
                t->opts.baseline_measured_at = b.measured_at;
                t->baseline_cache_hit = 1;
            }
        }
    }
    pk_job *job = NULL;
    int rc = pk_job_create(t->problem, t->source, &t->opts, &job, t->res, t->err);
    if (rc || !job)
        return rc; /* no job: the result already says why (e.g. format error) */
    if (t->res->status == PK_STATUS_FORMAT_ERROR) { /* no run will follow: no warm-up */
        pthread_mutex_lock(&h->warm_mu);
        t->warm_pending = 0;
        pthread_mutex_unlock(&h->warm_mu);
    }
    publish_job(h, t, job);
    const char *key = pk_job_compile_key(job);
    /* Identical jobs in flight (e.g. equal responses in one GRPO group) compile once. */
    int gated = h->compile_cache && pk_key_gate_enter(&h->gate, key) == PK_OK;
    char *cached = pk_compile_cache_lookup(h->compile_cache, key);
    if (cached) {
        rc = pk_job_use_object(job, cached, t->res, t->err);
        t->compile_cache_hit = rc == PK_OK;
        free(cached);
    }
    if (!t->compile_cache_hit) {
        rc = pk_job_compile(job, t->res, t->err);
        if (!rc && h->compile_cache && compiled_ok(job, t->res)) {
            pk_error store_err;
            /* A failed store only costs a later recompile. */
            t->compile_cache_miss =
                pk_compile_cache_store(h->compile_cache, key, pk_job_object_path(job),
                                       &store_err) == PK_OK;
        }
    }
    if (gated)
        pk_key_gate_leave(&h->gate, key);
    t->run_needed = !rc && compiled_ok(job, t->res);
    return rc;
}

static int compile(void *ctx, pk_sched_task *t) {
    harness_exec *h = ctx;
    int rc = compile_stage(h, t);
    pthread_mutex_lock(&h->warm_mu);
    t->compile_over = 1;
    t->warm_pending = 0;
    pthread_mutex_unlock(&h->warm_mu);
    return rc;
}

/* On the dispatcher thread, while compile runs (or is about to create the job). */
static int warm(void *ctx, pk_sched_task *t, const int *gpus, int n_gpus) {
    harness_exec *h = ctx;
    pk_error e;
    int rc = PK_OK;
    if (n_gpus < 1 || n_gpus > PK_SCHED_MAX_GPUS)
        return PK_ERR_INVALID;
    pthread_mutex_lock(&h->warm_mu);
    if (t->compile_over) {
        rc = PK_ERR_BUSY; /* too late: the run goes through the queue */
    } else if (t->state) {
        rc = pk_job_warm(t->state, gpus, n_gpus, &e);
    } else {
        t->warm_pending = 1;
        t->n_warm_gpus = n_gpus;
        memcpy(t->warm_gpus, gpus, (size_t)n_gpus * sizeof *gpus);
    }
    pthread_mutex_unlock(&h->warm_mu);
    return rc;
}

static int run(void *ctx, pk_sched_task *t, const int *gpus, int n_gpus) {
    harness_exec *h = ctx;
    int rc = pk_job_run(t->state, gpus, n_gpus, t->res, t->err);
    const pk_timing *ref = &t->res->reference;
    /* Only a baseline steady enough to be reused is cached; a noisy one is measured each step. */
    if (!rc && !t->baseline_cache_hit && baseline_usable(h, t) && t->res->has_timing &&
        ref->median_us > 0 && ref->cv <= h->baseline_max_cv) {
        pk_baseline_key k = baseline_key(h, t);
        pk_baseline_entry b = {.us = ref->median_us,
                               .cv = ref->cv,
                               .iters = ref->iters,
                               .measured_at = t->res->baseline.measured_at > 0
                                                  ? t->res->baseline.measured_at
                                                  : pk_wall_time_s()};
        pk_error store_err;
        pk_baseline_cache_store(h->baseline_dir, &k, &b, &store_err);
    }
    return rc;
}

static void release(void *ctx, pk_sched_task *t) {
    pk_job_free(t->state);
    t->state = NULL;
}

static void destroy(void *ctx) {
    harness_exec *h = ctx;
    pk_compile_cache_close(h->compile_cache);
    pk_key_gate_destroy(&h->gate);
    pthread_mutex_destroy(&h->warm_mu);
    free(h->baseline_dir);
    free(h);
}

void pk_completion_free(pk_completion *c) {
    if (!c)
        return;
    pk_eval_result_free(&c->result);
    free(c);
}

int pk_scheduler_create(const pk_scheduler_opts *opts, pk_scheduler **out, pk_error *err) {
    *out = NULL;
    harness_exec *h = calloc(1, sizeof *h);
    if (!h)
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    h->remeasure_baseline = opts ? opts->remeasure_baseline : 0;
    h->baseline_max_cv =
        opts && opts->baseline_max_cv > 0 ? opts->baseline_max_cv : PK_BASELINE_DEFAULT_MAX_CV;
    h->baseline_max_age_s = opts && opts->baseline_max_age_s > 0 ? opts->baseline_max_age_s
                                                                 : PK_BASELINE_DEFAULT_MAX_AGE_S;
    pk_key_gate_init(&h->gate);
    pthread_mutex_init(&h->warm_mu, NULL);
    pk_host_info_read(&h->host);
    h->rank_visibility = opts ? opts->rank_visibility : 0;
    if (opts && opts->lock_dir)
        snprintf(h->lock_dir, sizeof h->lock_dir, "%s", opts->lock_dir);
    else
        pk_gpu_lock_dir_default(h->lock_dir, sizeof h->lock_dir);
    /* Memory for co-resident jobs: 90% of what the GPUs have free now (other processes'
     * allocations included), unless given; not counted when NVML cannot say. */
    pk_scheduler_opts so = opts ? *opts : (pk_scheduler_opts){0};
    if (so.gpu_mem_mb == 0 && so.n_gpus > 0)
        so.gpu_mem_mb = pk_host_gpu_free_mb(so.gpus, so.n_gpus) * 9 / 10;
    int rc = PK_OK;
    if (opts && opts->cache_dir) {
        rc = pk_compile_cache_open(opts->cache_dir, &h->compile_cache, err);
        if (!rc)
            rc = pk_baseline_cache_open(opts->cache_dir, &h->baseline_dir, err);
    }
    if (rc) {
        destroy(h);
        return rc;
    }
    pk_sched_exec exec = {.ctx = h,
                          .describe = describe,
                          .compile = compile,
                          .run = run,
                          .release = release,
                          .warm = warm,
                          .device_mb = device_mb,
                          .free_completion = pk_completion_free,
                          .destroy = destroy};
    rc = pk_scheduler_create_with_exec(opts ? &so : NULL, &exec, out, err);
    /* On failure the scheduler has already destroyed h through exec.destroy. */
    return rc;
}
