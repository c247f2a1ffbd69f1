/* The scheduler's public API: create (sockets, threads), submit, stats, shutdown, free.
 * Threads: one dispatcher, compile workers, run workers; all talk through ZeroMQ inproc
 * sockets of the server's context (dispatcher.c, worker.c). */
#include "pk_sched_internal.h"
#include "pk_submit_queue.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#define PK_SCHED_DEFAULT_QUEUE_LIMIT 1024
#define PK_SCHED_DEFAULT_MAX_BYPASS 4
#define PK_SCHED_DEFAULT_JOBS_PER_GPU 8

static char *dup_or_null(const char *s) {
    return s ? strdup(s) : NULL;
}

static int default_compile_workers(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 1 ? (int)(n - 1) : 1;
}

static void *open_socket(pk_scheduler *s, int type, const char *ep, int bind, pk_error *err) {
    void *sock = zmq_socket(s->zctx, type);
    if (!sock) {
        pk_error_set(err, PK_ERR_IO, "zmq_socket: %s", zmq_strerror(zmq_errno()));
        return NULL;
    }
    int zero = 0, one = 1;
    /* Unbounded socket queues: the number of jobs is bounded by queue_limit instead. A
     * ROUTER fails a send to a worker it cannot route to instead of dropping it. */
    int rc = zmq_setsockopt(sock, ZMQ_LINGER, &zero, sizeof zero) ||
             zmq_setsockopt(sock, ZMQ_SNDHWM, &zero, sizeof zero) ||
             zmq_setsockopt(sock, ZMQ_RCVHWM, &zero, sizeof zero) ||
             (type == ZMQ_ROUTER && zmq_setsockopt(sock, ZMQ_ROUTER_MANDATORY, &one, sizeof one));
    if (rc != 0) {
        pk_error_set(err, PK_ERR_IO, "zmq_setsockopt: %s", zmq_strerror(zmq_errno()));
        zmq_close(sock);
        return NULL;
    }
    rc = bind ? zmq_bind(sock, ep) : zmq_connect(sock, ep);
    if (rc != 0) {
        pk_error_set(err, PK_ERR_IO, "zmq_%s %s: %s", bind ? "bind" : "connect", ep,
                     zmq_strerror(zmq_errno()));
        zmq_close(sock);
        return NULL;
    }
    return sock;
}

static int check_opts(const pk_scheduler_opts *o, pk_error *err) {
    if (!o || !o->zmq_ctx || !o->done_endpoint)
        return pk_error_set(err, PK_ERR_INVALID, "scheduler needs a zmq context and done_endpoint");
    if (o->n_gpus < 0 || o->n_gpus > PK_SCHED_MAX_GPUS)
        return pk_error_set(err, PK_ERR_INVALID, "n_gpus %d is not in 0..%d", o->n_gpus,
                            PK_SCHED_MAX_GPUS);
    if (o->compile_workers < 0 || o->queue_limit < 0 || o->run_host_slots < 0 ||
        o->jobs_per_gpu < 0 || o->jobs_per_gpu > 64)
        return pk_error_set(err, PK_ERR_INVALID,
                            "negative worker, slot or queue count, or jobs per GPU not in 0..64");
    return PK_OK;
}

static int start_threads(pk_scheduler *s, pk_error *err) {
    /* Every job a GPU may hold can be running at once. */
    int n_run = s->opts.n_gpus * s->gpu_slots.per_slot + s->host_slots.n_slots;
    s->n_workers = s->n_compile_workers + n_run;
    s->workers = calloc((size_t)s->n_workers, sizeof *s->workers);
    if (!s->workers)
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory for workers");
    for (int i = 0; i < s->n_workers; i++) {
        pk_sched_worker *w = &s->workers[i];
        w->s = s;
        w->index = i;
        w->kind = i < s->n_compile_workers ? PK_WORKER_COMPILE : PK_WORKER_RUN;
        w->busy = 1; /* until its READY arrives */
    }
    if (pthread_create(&s->dispatcher, NULL, pk_sched_dispatcher_main, s) != 0)
        return pk_error_set(err, PK_ERR_SYSTEM, "cannot start the dispatcher thread");
    s->dispatcher_started = 1;
    for (int i = 0; i < s->n_workers; i++) {
        if (pthread_create(&s->workers[i].thread, NULL, pk_sched_worker_main, &s->workers[i])) {
            /* The dispatcher waits only for the workers that exist. */
            pthread_mutex_lock(&s->mu);
            s->n_workers = i;
            pthread_mutex_unlock(&s->mu);
            return pk_error_set(err, PK_ERR_SYSTEM, "cannot start worker thread %d", i);
        }
        s->workers[i].started = 1;
    }
    return PK_OK;
}

int pk_scheduler_create_with_exec(const pk_scheduler_opts *opts, const pk_sched_exec *exec,
                                  pk_scheduler **out, pk_error *err) {
    *out = NULL;
    int rc = check_opts(opts, err);
    pk_scheduler *s = rc ? NULL : calloc(1, sizeof *s);
    if (!s) {
        if (exec->destroy)
            exec->destroy(exec->ctx); /* the scheduler owns the executor, even on failure */
        return rc ? rc : pk_error_set(err, PK_ERR_NOMEM, "out of memory for the scheduler");
    }
    s->opts = *opts;
    s->exec = *exec;
    s->zctx = opts->zmq_ctx;
    s->done_endpoint = strdup(opts->done_endpoint);
    s->cache_dir = dup_or_null(opts->cache_dir);
    s->opts.done_endpoint = s->done_endpoint;
    s->opts.cache_dir = s->cache_dir;
    if (s->opts.queue_limit == 0)
        s->opts.queue_limit = PK_SCHED_DEFAULT_QUEUE_LIMIT;
    s->n_compile_workers =
        opts->compile_workers ? opts->compile_workers : default_compile_workers();
    int host = opts->run_host_slots ? opts->run_host_slots : s->n_compile_workers;
    int bypass = opts->max_bypass == 0 ? PK_SCHED_DEFAULT_MAX_BYPASS
                                       : (opts->max_bypass < 0 ? 0 : opts->max_bypass);
    pthread_mutex_init(&s->mu, NULL);
    s->accepting = 1;
    s->next_ticket = 1;
    s->t_start_ms = pk_now_ms();
    s->stats.gpus_total = opts->n_gpus;
    s->stats.compile_workers = s->n_compile_workers;
    s->opts.jobs_per_gpu = opts->jobs_per_gpu ? opts->jobs_per_gpu : PK_SCHED_DEFAULT_JOBS_PER_GPU;
    s->opts.gpu_mem_mb = opts->gpu_mem_mb > 0 ? opts->gpu_mem_mb : 0;
    s->stats.jobs_per_gpu = s->opts.jobs_per_gpu;
    s->stats.gpu_mem_mb = s->opts.gpu_mem_mb;
    snprintf(s->submit_ep, sizeof s->submit_ep, "inproc://pk-sched-submit-%p", (void *)s);
    snprintf(s->work_ep, sizeof s->work_ep, "inproc://pk-sched-work-%p", (void *)s);

    if (!s->done_endpoint || (opts->cache_dir && !s->cache_dir))
        rc = pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    if (!rc)
        rc = pk_gpu_slots_init(&s->gpu_slots, opts->n_gpus, bypass, err);
    if (!rc)
        rc = pk_gpu_slots_set_capacity(&s->gpu_slots, s->opts.jobs_per_gpu,
                                       (uint64_t)s->opts.gpu_mem_mb, err);
    if (!rc)
        rc = pk_gpu_slots_init(&s->host_slots, host > PK_GPU_SLOTS_MAX ? PK_GPU_SLOTS_MAX : host, 0,
                               err);
    if (!rc && !(s->submit_pull = open_socket(s, ZMQ_PULL, s->submit_ep, 1, err)))
        rc = err ? err->code : PK_ERR_IO;
    if (!rc && !(s->submit_push = open_socket(s, ZMQ_PUSH, s->submit_ep, 0, err)))
        rc = err ? err->code : PK_ERR_IO;
    if (!rc && !(s->work_router = open_socket(s, ZMQ_ROUTER, s->work_ep, 1, err)))
        rc = err ? err->code : PK_ERR_IO;
    if (!rc && !(s->done_push = open_socket(s, ZMQ_PUSH, s->done_endpoint, 0, err)))
        rc = err ? err->code : PK_ERR_IO;
    if (!rc)
        rc = start_threads(s, err);
    if (rc) {
        pk_scheduler_shutdown(s, 0);
        pk_scheduler_free(s);
        return rc ? rc : PK_ERR_INTERNAL;
    }
    *out = s;
    return PK_OK;
}

static void free_job(pk_sched_job *j) {
    free(j->source);
    free(j->work_root);
    free(j->launcher);
    free(j);
}

static pk_sched_job *new_job(const pk_problem *p, const char *source, const pk_eval_opts *opts,
                             void *user) {
    pk_sched_job *j = calloc(1, sizeof *j);
    if (!j)
        return NULL;
    j->completion = calloc(1, sizeof *j->completion);
    j->source = strdup(source);
    if (opts)
        j->task.opts = *opts; /* NULL: all zero, which means the harness's defaults */
    j->work_root = dup_or_null(j->task.opts.work_root);
    j->launcher = dup_or_null(j->task.opts.launcher);
    if (!j->completion || !j->source || (j->task.opts.work_root && !j->work_root) ||
        (j->task.opts.launcher && !j->launcher)) {
        free(j->completion);
        free_job(j);
        return NULL;
    }
    j->task.opts.work_root = j->work_root;
    j->task.opts.launcher = j->launcher;
    j->task.problem = p;
    j->task.source = j->source;
    j->task.res = &j->completion->result;
    j->task.err = &j->completion->error;
    j->completion->user = user;
    j->t_submit_ms = pk_now_ms();
    return j;
}

int pk_scheduler_submit(pk_scheduler *s, const pk_problem *p, const char *source,
                        const pk_eval_opts *opts, void *user, uint64_t *ticket, pk_error *err) {
    if (!s || !p || !source)
        return pk_error_set(err, PK_ERR_INVALID, "submit needs a scheduler, problem and source");
    int world = 0, needs_gpu = 0;
    int rc = s->exec.describe(s->exec.ctx, p, &world, &needs_gpu, err);
    if (rc)
        return rc;
    if (opts && opts->world_size > 0)
        world = opts->world_size; /* one of the problem's other world sizes */
    if (needs_gpu && (world < 1 || world > s->opts.n_gpus))
        return pk_error_set(err, PK_ERR_UNSUPPORTED,
                            "this problem needs %d GPUs; the server has %d GPU slots", world,
                            s->opts.n_gpus);
    pk_sched_job *j = new_job(p, source, opts, user);
    if (!j)
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory queueing a job");
    j->world_size = world;
    j->needs_gpu = needs_gpu;
    j->mem_mb = needs_gpu && s->exec.device_mb ? s->exec.device_mb(s->exec.ctx, p, world) : 0;

    pthread_mutex_lock(&s->mu);
    if (!s->accepting) {
        rc = pk_error_set(err, PK_ERR_BUSY, "the scheduler is shutting down");
    } else if (s->in_flight >= s->opts.queue_limit) {
        s->stats.overloaded++;
        rc =
            pk_error_set(err, PK_ERR_OVERLOADED, "overloaded: %d jobs queued or running (limit %d)",
                         s->in_flight, s->opts.queue_limit);
    } else {
        j->task.ticket = j->completion->ticket = s->next_ticket;
        rc = pk_submit_send_job(s->submit_push, j, err);
        if (!rc) {
            s->next_ticket++;
            s->in_flight++;
            s->stats.queued_compile++;
            if (ticket)
                *ticket = j->task.ticket;
        }
    }
    pthread_mutex_unlock(&s->mu);
    if (rc) {
        free(j->completion);
        free_job(j);
    }
    return rc;
}

void pk_scheduler_get_stats(pk_scheduler *s, pk_scheduler_stats *out) {
    pthread_mutex_lock(&s->mu);
    *out = s->stats;
    double now = pk_now_ms();
    out->uptime_ms = now - s->t_start_ms;
    for (int i = 0; i < s->opts.n_gpus; i++) /* GPUs holding a job now: held until now */
        if (s->held_since[i] > 0)
            out->gpu_busy_ms += now - s->held_since[i];
    pthread_mutex_unlock(&s->mu);
}

void pk_scheduler_shutdown(pk_scheduler *s, int grace_ms) {
    if (!s)
        return;
    pthread_mutex_lock(&s->mu);
    int was_accepting = s->accepting;
    s->accepting = 0;
    if (was_accepting && s->dispatcher_started && s->submit_push)
        pk_submit_send_stop(s->submit_push, grace_ms, "scheduler");
    pthread_mutex_unlock(&s->mu);
    if (s->dispatcher_started) {
        pthread_join(s->dispatcher, NULL);
        s->dispatcher_started = 0;
    }
    for (int i = 0; i < s->n_workers; i++) {
        if (s->workers[i].started) {
            pthread_join(s->workers[i].thread, NULL);
            s->workers[i].started = 0;
        }
    }
}

void pk_scheduler_free(pk_scheduler *s) {
    if (!s)
        return;
    pk_scheduler_shutdown(s, 0);
    void *socks[] = {s->submit_push, s->submit_pull, s->work_router, s->done_push};
    for (size_t i = 0; i < sizeof socks / sizeof socks[0]; i++)
        if (socks[i])
            zmq_close(socks[i]);
    pk_gpu_slots_destroy(&s->gpu_slots);
    pk_gpu_slots_destroy(&s->host_slots);
    if (s->exec.destroy)
        s->exec.destroy(s->exec.ctx);
    pthread_mutex_destroy(&s->mu);
    free(s->workers);
    free(s->done_endpoint);
    free(s->cache_dir);
    free(s);
}

void pk_sched_job_free(pk_sched_job *j) {
    if (j)
        free_job(j);
}
