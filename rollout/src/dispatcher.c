/* The dispatcher thread: owns the queues and the slot allocators, hands compile stages to
 * idle compile workers and run stages to idle run workers once their GPUs (all at once) or
 * a host slot are granted, and sends every finished job to the server's done_endpoint.
 * Pre-grants (rollout/README.md): when no compiled job waits for GPUs, the GPU jobs still
 * compiling get their GPUs, oldest first, while the GPUs have room, and the executor warms
 * their runs on them. */
#include "pk_sched_internal.h"
#include "pk_submit_queue.h"

#include <stdio.h>
#include <string.h>
#include <zmq.h>

/* The work router is ROUTER_MANDATORY (scheduler.c): a worker it cannot reach is an error,
 * not a silently dropped message. Such a worker is never used again. */
static int send_to_worker(pk_scheduler *s, pk_sched_worker *w, const pk_sched_msg *m) {
    char id[16];
    int n = snprintf(id, sizeof id, "w%d", w->index);
    if (zmq_send(s->work_router, id, (size_t)n, ZMQ_SNDMORE) == n &&
        zmq_send(s->work_router, m, sizeof *m, 0) == (int)sizeof *m)
        return PK_OK;
    fprintf(stderr, "pkgym scheduler: cannot reach worker %d: %s\n", w->index,
            zmq_strerror(zmq_errno()));
    pthread_mutex_lock(&s->mu);
    w->dead = 1;
    pthread_mutex_unlock(&s->mu);
    w->busy = 1; /* never picked again */
    w->job = NULL;
    return PK_ERR_IO;
}

/* Under s->mu: held time per GPU and the GPUs holding jobs, from the slots' loads. */
static void sync_held(pk_scheduler *s) {
    double now = pk_now_ms();
    int busy = 0;
    for (int i = 0; i < s->gpu_slots.n_slots; i++) {
        int load = s->gpu_slots.load[i];
        busy += load > 0;
        if (load > s->stats.peak_resident)
            s->stats.peak_resident = load;
        if (load > 0 && s->held_since[i] <= 0) {
            s->held_since[i] = now;
        } else if (load == 0 && s->held_since[i] > 0) {
            s->stats.gpu_busy_ms += now - s->held_since[i];
            s->held_since[i] = 0;
        }
    }
    s->stats.gpus_busy = busy;
}

/* A GPU job takes (delta 1) or gives back (-1) its GPUs; the slots have been updated. */
static void note_gpus(pk_scheduler *s, int delta) {
    pthread_mutex_lock(&s->mu);
    s->stats.resident_jobs += delta;
    sync_held(s);
    pthread_mutex_unlock(&s->mu);
}

static void finish(pk_scheduler *s, pk_sched_job *j) {
    pk_completion *c = j->completion;
    pthread_mutex_lock(&s->mu);
    s->in_flight--;
    s->stats.done++;
    if (c->harness_rc)
        s->stats.harness_failures++;
    if (j->task.compile_cache_hit)
        s->stats.compile_cache_hits++;
    if (j->task.compile_cache_miss)
        s->stats.compile_cache_misses++;
    if (j->task.baseline_cache_hit)
        s->stats.baseline_cache_hits++;
    if (j->task.baseline_cache_stale)
        s->stats.baseline_cache_stale++;
    pthread_mutex_unlock(&s->mu);
    pk_sched_job_free(j);
    void *ptr = c;
    if (zmq_send(s->done_push, &ptr, sizeof ptr, 0) != (int)sizeof ptr) {
        fprintf(stderr, "pkgym scheduler: cannot deliver job %llu: %s\n",
                (unsigned long long)c->ticket, zmq_strerror(zmq_errno()));
        s->exec.free_completion(c);
    }
}

/* Gives back the GPUs a pre-granted job holds (its run will not happen). */
static void drop_pregrant(pk_scheduler *s, pk_sched_job *j) {
    if (!j->pregranted)
        return;
    pk_gpu_slots_release_mem(&s->gpu_slots, j->slots, j->n_slots, (uint64_t)j->mem_mb);
    note_gpus(s, -1);
    j->pregranted = 0;
    j->n_slots = 0;
}

/* Ends j without a verdict: harness_rc set (the server answers `internal`, no turn). */
static void fail_job(pk_scheduler *s, pk_sched_job *j, int code, const char *why) {
    if (j->task.state)
        s->exec.release(s->exec.ctx, &j->task); /* ends a warm run before its GPUs go back */
    drop_pregrant(s, j);
    j->task.res->status = PK_STATUS_TIMEOUT;
    snprintf(j->task.res->reason, sizeof j->task.res->reason, "cancelled: %s", why);
    j->completion->harness_rc = pk_error_set(j->task.err, code, "%s", why);
    finish(s, j);
}

static void cancel(pk_scheduler *s, pk_sched_job *j) {
    fail_job(s, j, PK_ERR_BUSY, "the scheduler shut down (its grace ended) before this job ran");
}

/* Cancels every job that waits (for a compile worker, a run worker or its slots); returns
 * how many. */
static int cancel_waiting(pk_scheduler *s) {
    int n_compile = 0, n_run = 0, n_ready = 0;
    while (s->compile_head) {
        pk_sched_job *j = s->compile_head;
        s->compile_head = j->next;
        cancel(s, j);
        n_compile++;
    }
    s->compile_tail = NULL;
    while (s->ready_head) {
        pk_sched_job *j = s->ready_head;
        s->ready_head = j->next;
        cancel(s, j);
        n_ready++;
    }
    s->ready_tail = NULL;
    void *item;
    while (pk_gpu_slots_pop_waiting(&s->gpu_slots, &item) ||
           pk_gpu_slots_pop_waiting(&s->host_slots, &item)) {
        cancel(s, item);
        n_run++;
    }
    pthread_mutex_lock(&s->mu);
    s->stats.queued_compile -= n_compile;
    s->stats.queued_run -= n_run;
    pthread_mutex_unlock(&s->mu);
    return n_compile + n_run + n_ready;
}

static pk_sched_worker *idle_worker(pk_scheduler *s, int kind) {
    for (int i = 0; i < s->n_workers; i++)
        if (s->workers[i].kind == kind && !s->workers[i].busy)
            return &s->workers[i];
    return NULL;
}

static void start_compiles(pk_scheduler *s) {
    pk_sched_worker *w;
    while (s->compile_head && (w = idle_worker(s, PK_WORKER_COMPILE))) {
        pk_sched_job *j = s->compile_head;
        s->compile_head = j->next;
        if (!s->compile_head)
            s->compile_tail = NULL;
        w->busy = 1;
        w->job = j;
        pk_sched_msg m = {.type = PK_MSG_COMPILE, .ticket = j->task.ticket, .job = (uintptr_t)j};
        pthread_mutex_lock(&s->mu);
        s->stats.queued_compile--;
        s->stats.compiling++;
        pthread_mutex_unlock(&s->mu);
        if (send_to_worker(s, w, &m) != PK_OK) {
            pthread_mutex_lock(&s->mu);
            s->stats.compiling--;
            pthread_mutex_unlock(&s->mu);
            fail_job(s, j, PK_ERR_IO, "the scheduler could not reach a compile worker");
        }
    }
}

/* Hands j's run to w; on failure gives its slots back and fails it. */
static void send_run(pk_scheduler *s, pk_sched_worker *w, pk_sched_job *j, int gpu) {
    pk_sched_msg m = {.type = PK_MSG_RUN, .ticket = j->task.ticket, .job = (uintptr_t)j};
    if (gpu) {
        m.n_gpus = j->n_slots;
        for (int i = 0; i < j->n_slots; i++)
            m.gpus[i] = s->opts.gpus[j->slots[i]];
    }
    w->busy = 1;
    w->job = j;
    if (send_to_worker(s, w, &m) == PK_OK)
        return;
    pthread_mutex_lock(&s->mu);
    s->stats.running--;
    s->stats.gpus_busy -= gpu ? j->n_slots : 0;
    pthread_mutex_unlock(&s->mu);
    pk_gpu_slots_release(gpu ? &s->gpu_slots : &s->host_slots, j->slots, j->n_slots);
    j->pregranted = 0; /* its GPUs went back just now */
    fail_job(s, j, PK_ERR_IO, "the scheduler could not reach a run worker");
}

static void start_runs(pk_scheduler *s) {
    pk_sched_worker *w;
    /* Pre-granted jobs hold their GPUs already. A run worker is always idle for them (there
     * are as many as jobs the GPUs and host slots may hold); the list only covers the moment
     * in between. */
    while (s->ready_head && (w = idle_worker(s, PK_WORKER_RUN))) {
        pk_sched_job *j = s->ready_head;
        s->ready_head = j->next;
        if (!s->ready_head)
            s->ready_tail = NULL;
        pthread_mutex_lock(&s->mu);
        s->stats.running++;
        pthread_mutex_unlock(&s->mu);
        send_run(s, w, j, 1);
    }
    while ((w = idle_worker(s, PK_WORKER_RUN))) {
        void *item = NULL;
        int slots[PK_GPU_SLOTS_MAX], width = 0, gpu = 1;
        if (!pk_gpu_slots_grant(&s->gpu_slots, &item, slots, &width)) {
            gpu = 0;
            if (!pk_gpu_slots_grant(&s->host_slots, &item, slots, &width))
                return;
        }
        pk_sched_job *j = item;
        j->n_slots = width;
        memcpy(j->slots, slots, (size_t)width * sizeof *slots);
        pthread_mutex_lock(&s->mu);
        s->stats.queued_run--;
        s->stats.running++;
        s->stats.backfilled = s->gpu_slots.backfilled;
        pthread_mutex_unlock(&s->mu);
        if (gpu)
            note_gpus(s, 1);
        send_run(s, w, j, gpu);
    }
}

/* The oldest GPU job on a compile worker that has not been considered for a pre-grant. */
static pk_sched_job *oldest_compiling(pk_scheduler *s) {
    pk_sched_job *oldest = NULL;
    for (int i = 0; i < s->n_workers; i++) {
        pk_sched_job *j = s->workers[i].job;
        if (s->workers[i].kind != PK_WORKER_COMPILE || !s->workers[i].busy || !j)
            continue;
        if (j->needs_gpu && !j->pregranted && !j->warm_tried &&
            (!oldest || j->task.ticket < oldest->task.ticket))
            oldest = j;
    }
    return oldest;
}

/* Pre-grants: only room nobody waits for, so fairness and utilisation are unchanged. With
 * several jobs per GPU every compiling job is warmed, oldest first, while there is room. */
static void pregrant(pk_scheduler *s) {
    if (!s->exec.warm)
        return;
    pk_sched_job *j;
    while ((j = oldest_compiling(s))) {
        int slots[PK_GPU_SLOTS_MAX], gpus[PK_SCHED_MAX_GPUS];
        /* Fails while any compiled job waits for GPUs, or when j's W GPUs have no room:
         * then j waits like any job (its turn comes when its compile ends). */
        if (!pk_gpu_slots_take_idle_mem(&s->gpu_slots, j->world_size, (uint64_t)j->mem_mb, slots))
            return;
        j->warm_tried = 1;
        for (int i = 0; i < j->world_size; i++)
            gpus[i] = s->opts.gpus[slots[i]];
        if (s->exec.warm(s->exec.ctx, &j->task, gpus, j->world_size) != PK_OK) {
            pk_gpu_slots_release_mem(&s->gpu_slots, slots, j->world_size, (uint64_t)j->mem_mb);
            continue;
        }
        j->pregranted = 1;
        j->n_slots = j->world_size;
        memcpy(j->slots, slots, (size_t)j->world_size * sizeof *slots);
        pthread_mutex_lock(&s->mu);
        s->stats.pregranted++;
        pthread_mutex_unlock(&s->mu);
        note_gpus(s, 1);
    }
}

static void queue_run(pk_scheduler *s, pk_sched_job *j) {
    pk_gpu_slots *pool = j->needs_gpu ? &s->gpu_slots : &s->host_slots;
    int rc = pk_gpu_slots_request_mem(pool, j->task.ticket, j, j->needs_gpu ? j->world_size : 1,
                                      j->needs_gpu ? (uint64_t)j->mem_mb : 0, j->task.err);
    if (rc) {
        if (j->task.state)
            s->exec.release(s->exec.ctx, &j->task);
        j->completion->harness_rc = rc;
        finish(s, j);
        return;
    }
    pthread_mutex_lock(&s->mu);
    s->stats.queued_run++;
    pthread_mutex_unlock(&s->mu);
}

static int infra_limit(const pk_scheduler *s) {
    return s->opts.gpu_infra_limit > 0 ? s->opts.gpu_infra_limit : 3;
}

static void gpu_list(const pk_scheduler *s, const pk_sched_job *j, char *out, size_t cap) {
    size_t used = 0;
    out[0] = '\0';
    for (int k = 0; j->needs_gpu && k < j->n_slots && used < cap; k++)
        used += (size_t)snprintf(out + used, cap - used, "%s%d", k ? "," : "",
                                 s->opts.gpus[j->slots[k]]);
}

/* Jobs waiting for more GPUs than the pool has left can never run. */
static void fail_unfit(pk_scheduler *s) {
    void *item;
    while (pk_gpu_slots_pop_unfit(&s->gpu_slots, &item)) {
        pthread_mutex_lock(&s->mu);
        s->stats.queued_run--;
        pthread_mutex_unlock(&s->mu);
        fail_job(s, item, PK_ERR_INFRA,
                 "infra_error: not enough GPUs are left in the pool for this job (the others "
                 "kept failing before any candidate code ran; see the server's log)");
    }
}

/* A GPU run's verdict for its GPUs: an infra_error counts against each of them, any other
 * verdict clears them; a GPU at the limit leaves the pool for good. */
static void note_gpu_health(pk_scheduler *s, const pk_sched_job *j, int infra) {
    int removed = 0;
    for (int k = 0; k < j->n_slots; k++) {
        int slot = j->slots[k];
        if (!infra) {
            s->infra_streak[slot] = 0;
            continue;
        }
        if (++s->infra_streak[slot] < infra_limit(s) || s->gpu_slots.disabled[slot])
            continue;
        pk_gpu_slots_disable(&s->gpu_slots, slot);
        removed = 1;
        fprintf(stderr,
                "pkgym scheduler: GPU %d leaves the pool: %d runs on it in a row failed before "
                "any candidate code ran (last: %.300s); %d of %d GPUs left\n",
                s->opts.gpus[slot], s->infra_streak[slot], j->task.res->reason,
                s->gpu_slots.n_enabled, s->gpu_slots.n_slots);
        pthread_mutex_lock(&s->mu);
        s->stats.gpus_removed[s->stats.n_gpus_removed++] = s->opts.gpus[slot];
        pthread_mutex_unlock(&s->mu);
    }
    if (removed)
        fail_unfit(s);
}

/* A run that failed before the candidate's code was loaded is ours: run it once more, on
 * other GPUs where there are any. Returns 1 when it was queued again. */
static int retry_infra(pk_scheduler *s, pk_sched_job *j) {
    char gpus[128];
    gpu_list(s, j, gpus, sizeof gpus);
    snprintf(j->infra_first, sizeof j->infra_first, "%s%s%s%.150s", j->needs_gpu ? "GPUs " : "",
             gpus, j->needs_gpu ? ": " : "", j->task.res->reason);
    if (j->infra_tries > 0 || s->grace_over || !j->task.state)
        return 0;
    uint64_t avoid = 0;
    for (int k = 0; j->needs_gpu && k < j->n_slots; k++)
        avoid |= 1ull << j->slots[k];
    pk_gpu_slots *pool = j->needs_gpu ? &s->gpu_slots : &s->host_slots;
    pk_error e;
    if (pk_gpu_slots_request_avoid(pool, j->task.ticket, j, j->needs_gpu ? j->world_size : 1,
                                   j->needs_gpu ? (uint64_t)j->mem_mb : 0, avoid, &e) != PK_OK)
        return 0;
    fprintf(stderr, "pkgym scheduler: job %llu: infra_error (%s); run again once\n",
            (unsigned long long)j->task.ticket, j->infra_first);
    j->infra_tries++;
    j->n_slots = 0;
    j->pregranted = 0; /* its GPUs went back above */
    pthread_mutex_lock(&s->mu);
    s->stats.infra_retries++;
    s->stats.queued_run++;
    pthread_mutex_unlock(&s->mu);
    return 1;
}

/* The second infra_error (or no retry possible): no verdict; the server answers the step with
 * the protocol error infra_error, naming both causes. */
static void give_up_infra(pk_scheduler *s, pk_sched_job *j) {
    if (j->task.state)
        s->exec.release(s->exec.ctx, &j->task);
    char gpus[128];
    gpu_list(s, j, gpus, sizeof gpus);
    if (j->infra_tries > 0)
        j->completion->harness_rc = pk_error_set(
            j->task.err, PK_ERR_INFRA,
            "infra_error: the evaluation failed twice before the candidate's code was loaded "
            "(not the candidate's failure; no turn recorded): first %s%s; again%s%s: %.200s",
            j->needs_gpu ? "on " : "", j->infra_first, j->needs_gpu ? " on GPUs " : "", gpus,
            j->task.res->reason);
    else
        j->completion->harness_rc = pk_error_set(
            j->task.err, PK_ERR_INFRA,
            "infra_error: the evaluation failed before the candidate's code was loaded and "
            "could not be run again (not the candidate's failure; no turn recorded): %s",
            j->infra_first);
    pthread_mutex_lock(&s->mu);
    s->stats.infra_failed++;
    pthread_mutex_unlock(&s->mu);
}

static void on_done(pk_scheduler *s, pk_sched_worker *w, const pk_sched_msg *m) {
    pk_sched_job *j = w->job;
    w->busy = 0;
    w->job = NULL;
    if (!j)
        return; /* the READY of a fresh worker */
    int was_run = w->kind == PK_WORKER_RUN;
    pthread_mutex_lock(&s->mu);
    if (was_run) {
        s->stats.running--;
        if (j->needs_gpu) {
            /* What the GPUs did for this job: trials and timing, less the time it waited for
             * other jobs' timing locks inside them (the runner's own figures). */
            const pk_stage_times *t = &j->task.res->stages;
            double kernel = t->run_check_ms + t->run_timing_ms - t->run_lock_wait_ms;
            s->stats.gpu_kernel_ms += (kernel > 0 ? kernel : 0) * j->n_slots;
            s->stats.gpu_timing_ms += t->run_timing_ms * j->n_slots;
            s->stats.gpu_lock_wait_ms += t->run_lock_wait_ms * j->n_slots;
        } else {
            s->stats.host_busy_ms += m->busy_ms;
        }
    } else {
        s->stats.compiling--;
        s->stats.compile_busy_ms += m->busy_ms;
    }
    pthread_mutex_unlock(&s->mu);
    if (was_run) {
        int infra = !j->completion->harness_rc && j->task.res->status == PK_STATUS_INFRA_ERROR;
        if (j->needs_gpu) {
            pk_gpu_slots_release_mem(&s->gpu_slots, j->slots, j->n_slots, (uint64_t)j->mem_mb);
            note_gpus(s, -1);
        } else {
            pk_gpu_slots_release(&s->host_slots, j->slots, j->n_slots);
        }
        if (infra) {
            pthread_mutex_lock(&s->mu);
            s->stats.infra_errors++;
            pthread_mutex_unlock(&s->mu);
        }
        if (j->needs_gpu)
            note_gpu_health(s, j, infra);
        if (infra && retry_infra(s, j))
            return;
        if (infra)
            give_up_infra(s, j);
        finish(s, j);
    } else if (!j->task.run_needed || j->completion->harness_rc) {
        drop_pregrant(s, j); /* the worker's release has ended the warm run */
        finish(s, j);
    } else if (s->grace_over) {
        cancel(s, j); /* compiled after the grace: it does not run */
    } else if (j->pregranted) {
        j->next = NULL;
        if (s->ready_tail)
            s->ready_tail->next = j;
        else
            s->ready_head = j;
        s->ready_tail = j;
    } else {
        queue_run(s, j);
    }
}

static void read_submits(pk_scheduler *s) {
    void *job;
    double grace_ms;
    int kind;
    while ((kind = pk_submit_recv(s->submit_pull, &job, &grace_ms)) != PK_SUBMIT_NONE) {
        if (kind == PK_SUBMIT_JOB) {
            pk_sched_job *j = job;
            j->next = NULL;
            if (s->compile_tail)
                s->compile_tail->next = j;
            else
                s->compile_head = j;
            s->compile_tail = j;
        } else if (!s->stopping) {
            /* Work goes on until the deadline (pk_sched_dispatcher_main). */
            s->stopping = 1;
            s->stop_deadline_ms = pk_now_ms() + grace_ms;
        }
    }
}

static void read_workers(pk_scheduler *s) {
    for (;;) {
        char id[16];
        pk_sched_msg m;
        int n = zmq_recv(s->work_router, id, sizeof id - 1, ZMQ_DONTWAIT);
        if (n < 0)
            return;
        int more = 0;
        size_t more_len = sizeof more;
        if (zmq_getsockopt(s->work_router, ZMQ_RCVMORE, &more, &more_len) != 0 || !more)
            continue;
        int len = zmq_recv(s->work_router, &m, sizeof m, 0);
        int index = -1;
        id[n < (int)sizeof id - 1 ? n : (int)sizeof id - 1] = '\0';
        if (len != (int)sizeof m || sscanf(id, "w%d", &index) != 1 || index < 0 ||
            index >= s->n_workers)
            continue;
        on_done(s, &s->workers[index], &m);
    }
}

static int all_idle(pk_scheduler *s) {
    pthread_mutex_lock(&s->mu);
    int n = s->n_workers; /* may have shrunk if a worker failed to start */
    int idle = 1;
    for (int i = 0; i < n; i++)
        if (s->workers[i].busy && !s->workers[i].dead)
            idle = 0;
    pthread_mutex_unlock(&s->mu);
    return idle;
}

static void stop_workers(pk_scheduler *s) {
    pk_sched_msg m = {.type = PK_MSG_STOP};
    for (int i = 0; i < s->n_workers; i++)
        if (!s->workers[i].dead)
            send_to_worker(s, &s->workers[i], &m);
}

static int nothing_queued(const pk_scheduler *s) {
    return !s->compile_head && !s->ready_head && !s->gpu_slots.n_queued && !s->host_slots.n_queued;
}

static int running_stages(pk_scheduler *s) {
    int n = 0;
    pthread_mutex_lock(&s->mu);
    for (int i = 0; i < s->n_workers; i++)
        n += s->workers[i].busy && !s->workers[i].dead && s->workers[i].job;
    pthread_mutex_unlock(&s->mu);
    return n;
}

/* Shutdown (pk_scheduler_shutdown): until the deadline, queued and compiled work proceeds as
 * usual; then whatever has not started is cancelled. A stage already running is not
 * interrupted (the harness's compile and run timeouts bound it): a run ends with its verdict,
 * a compile that ends after the deadline is cancelled. Returns 1 when the dispatcher may stop. */
static int stop_step(pk_scheduler *s) {
    if (!s->grace_over && pk_now_ms() >= s->stop_deadline_ms) {
        s->grace_over = 1;
        int queued = cancel_waiting(s);
        int running = running_stages(s);
        if (queued || running)
            fprintf(stderr,
                    "pkgym scheduler: shutdown grace over: %d queued job(s) cancelled; waiting "
                    "for %d running stage(s)\n",
                    queued, running);
    }
    if (!s->grace_over) {
        start_compiles(s);
        start_runs(s);
        pregrant(s);
    }
    if (all_idle(s) && (s->grace_over || nothing_queued(s))) {
        stop_workers(s);
        return 1;
    }
    return 0;
}

void *pk_sched_dispatcher_main(void *arg) {
    pk_scheduler *s = arg;
    zmq_pollitem_t items[2] = {{s->submit_pull, 0, ZMQ_POLLIN, 0},
                               {s->work_router, 0, ZMQ_POLLIN, 0}};
    for (;;) {
        if (zmq_poll(items, 2, s->stopping ? 20 : -1) < 0 && zmq_errno() == ETERM)
            break;
        read_submits(s);
        read_workers(s);
        if (s->stopping) {
            if (stop_step(s))
                break;
            continue;
        }
        start_compiles(s);
        start_runs(s);
        pregrant(s);
    }
    return NULL;
}
