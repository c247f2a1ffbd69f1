/* Rollout benchmark: E concurrent episodes of T turns each, driven straight into the scheduler
 * with the real harness (no server), the responses taken from a replay directory. Two phases:
 * cold (an empty compile cache; every episode's source is made unique, so every step
 * compiles) and warm (the same sources again: every step hits the compile cache). Prints per
 * phase: steps/s, how busy the compile pool was, the GPUs' held and kernel-busy shares apart
 * (held: a job resident, its start-up and exit included; kernel-busy: its trials and timing,
 * less lock waits; timing: the part that held the GPUs alone), the median and p90 step
 * latency (submit to completion), the cache counts, the turn outcomes, how much of the run
 * stages was process launch and CUDA/NCCL/MPI init, the mean lock wait per run and the most
 * jobs one GPU held at once. The warm phase restarts the episodes from turn 1 with the same
 * sources. --jobs-per-gpu and --gpu-mem-mb set the co-residency (pk_scheduler_opts). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <zmq.h>

#include "pk_scheduler.h"

typedef struct args {
    const char *root, *modules, *replay, *suite, *cache;
    int episodes, warm_episodes, turns, compile_workers, trials, n_gpus, jobs_per_gpu;
    long gpu_mem_mb;
    int gpus[PK_SCHED_MAX_GPUS];
} args;

typedef struct episode {
    const pk_problem *p;
    int turn; /* next turn to submit, 1-based */
    double submitted_ms;
} episode;

/* The last fenced code block of a Markdown response (malloc'd), or NULL. */
static char *last_code_block(const char *md) {
    const char *start = NULL, *end = NULL;
    for (const char *p = strstr(md, "```"); p; p = strstr(p, "```")) {
        const char *body = strchr(p, '\n');
        if (!body)
            break;
        const char *close = strstr(body + 1, "\n```");
        if (!close)
            break;
        start = body + 1;
        end = close + 1;
        p = close + 4;
    }
    if (!start)
        return NULL;
    char *code = malloc((size_t)(end - start) + 1);
    if (code) {
        memcpy(code, start, (size_t)(end - start));
        code[end - start] = 0;
    }
    return code;
}

/* The source of problem p at turn t for episode e: the replay's code, made unique per
 * episode by a leading comment (distinct compile keys, as distinct model outputs are). */
static char *source_for(const args *a, const pk_problem *p, int turn, int e) {
    char path[1024], *md = NULL;
    snprintf(path, sizeof path, "%s/%s/turn%d.md", a->replay, pk_problem_id(p), turn);
    if (pk_read_file(path, &md, NULL, NULL))
        return NULL;
    char *code = last_code_block(md);
    free(md);
    if (!code)
        return NULL;
    pk_strbuf sb = {0};
    pk_strbuf_printf(&sb, "// bench episode %d\n%s", e, code);
    free(code);
    return pk_strbuf_take(&sb);
}

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

static int submit(pk_scheduler *s, const args *a, episode *ep, int e, pk_error *err) {
    char *src = source_for(a, ep->p, ep->turn, e);
    if (!src)
        return pk_error_set(err, PK_ERR_NOT_FOUND, "%s: no replay response for turn %d",
                            pk_problem_id(ep->p), ep->turn);
    pk_eval_opts o;
    pk_eval_opts_default(&o);
    o.trials = a->trials;
    ep->submitted_ms = pk_now_ms();
    int rc = pk_scheduler_submit(s, ep->p, src, &o, ep, NULL, err);
    free(src);
    return rc;
}

static int run_phase(const char *name, int n_episodes, pk_scheduler *s, void *pull, const args *a,
                     const pk_problem **probs, int n_probs) {
    int total = n_episodes * a->turns, done = 0, counts[PK_STATUS_COUNT] = {0}, failures = 0;
    double run_ms = 0, setup_ms = 0; /* run stages, and their process launch + init part */
    double lock_wait_ms = 0;
    int runs = 0;
    episode *eps = calloc((size_t)n_episodes, sizeof *eps);
    double *lat = calloc((size_t)total, sizeof *lat);
    pk_scheduler_stats s0, s1;
    pk_error err;
    pk_scheduler_get_stats(s, &s0);
    double t0 = pk_now_ms();
    for (int e = 0; e < n_episodes; e++) {
        eps[e] = (episode){.p = probs[e % n_probs], .turn = 1};
        if (submit(s, a, &eps[e], e, &err)) {
            fprintf(stderr, "bench: submit: %s\n", err.message);
            return 1;
        }
    }
    while (done < total) {
        pk_completion *c = NULL;
        if (zmq_recv(pull, &c, sizeof c, 0) != (int)sizeof c) {
            fprintf(stderr, "bench: no completion: %s\n", zmq_strerror(zmq_errno()));
            return 1;
        }
        episode *ep = c->user;
        lat[done++] = pk_now_ms() - ep->submitted_ms;
        if (c->harness_rc) {
            failures++;
            fprintf(stderr, "bench: harness: %s\n", c->error.message);
        } else {
            counts[c->result.status]++;
            run_ms += c->result.stages.run_ms;
            setup_ms += c->result.stages.run_setup_ms;
            lock_wait_ms += c->result.stages.run_lock_wait_ms;
            runs += c->result.stages.run_ms > 0;
        }
        pk_completion_free(c);
        if (++ep->turn <= a->turns && submit(s, a, ep, (int)(ep - eps), &err)) {
            fprintf(stderr, "bench: submit: %s\n", err.message);
            return 1;
        }
    }
    double wall = (pk_now_ms() - t0) / 1000.0;
    pk_scheduler_get_stats(s, &s1);
    qsort(lat, (size_t)total, sizeof *lat, cmp_double);
    double compile_busy =
        (s1.compile_busy_ms - s0.compile_busy_ms) / (s1.compile_workers * wall * 1000);
    double gpu_ms = s1.gpus_total * wall * 1000;
    char gpu[64] = "-", kernel[32] = "-", timing[32] = "-";
    if (s1.gpus_total) {
        snprintf(gpu, sizeof gpu, "%.0f%% of %d", 100 * (s1.gpu_busy_ms - s0.gpu_busy_ms) / gpu_ms,
                 s1.gpus_total);
        snprintf(kernel, sizeof kernel, "%.1f%%",
                 100 * (s1.gpu_kernel_ms - s0.gpu_kernel_ms) / gpu_ms);
        snprintf(timing, sizeof timing, "%.1f%%",
                 100 * (s1.gpu_timing_ms - s0.gpu_timing_ms) / gpu_ms);
    }
    printf("| %s | %d | %.1f | %.2f | %.0f%% of %d | %s | %s | %s | %.0f | %.0f | %llu / %llu |",
           name, total, wall, total / wall, 100 * compile_busy, s1.compile_workers, gpu, kernel,
           timing, lat[total / 2], lat[(int)(total * 0.9)],
           (unsigned long long)(s1.compile_cache_hits - s0.compile_cache_hits),
           (unsigned long long)(s1.compile_cache_misses - s0.compile_cache_misses));
    for (int k = 0; k < PK_STATUS_COUNT; k++)
        if (counts[k])
            printf(" %s %d", pk_status_name((pk_status)k), counts[k]);
    printf("%s | %.0f%% | %.0f | %d |\n", failures ? " + harness failures" : "",
           run_ms > 0 ? 100 * setup_ms / run_ms : 0.0, runs ? lock_wait_ms / runs : 0.0,
           s1.peak_resident);
    fflush(stdout);
    free(eps);
    free(lat);
    return failures ? 1 : 0;
}

static int parse_gpus(const char *v, args *a) {
    a->n_gpus = 0;
    if (strcmp(v, "none") == 0)
        return 0;
    for (const char *p = v; *p && a->n_gpus < PK_SCHED_MAX_GPUS;) {
        a->gpus[a->n_gpus++] = atoi(p);
        p += strcspn(p, ",");
        p += *p == ',';
    }
    return 0;
}

static int parse_args(int argc, char **argv, args *a) {
    *a = (args){.root = PK_BENCH_PROBLEMS,
                .modules = PK_BENCH_MODULES,
                .suite = "selftest",
                .episodes = 64,
                .warm_episodes = -1,
                .turns = 3,
                .trials = 0};
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *o = argv[i], *v = argv[i + 1];
        if (!strcmp(o, "--problems-root"))
            a->root = v;
        else if (!strcmp(o, "--modules"))
            a->modules = v;
        else if (!strcmp(o, "--replay"))
            a->replay = v;
        else if (!strcmp(o, "--suite"))
            a->suite = v;
        else if (!strcmp(o, "--cache-dir"))
            a->cache = v;
        else if (!strcmp(o, "--episodes"))
            a->episodes = atoi(v);
        else if (!strcmp(o, "--warm-episodes"))
            a->warm_episodes = atoi(v);
        else if (!strcmp(o, "--turns"))
            a->turns = atoi(v);
        else if (!strcmp(o, "--compile-workers"))
            a->compile_workers = atoi(v);
        else if (!strcmp(o, "--trials"))
            a->trials = atoi(v);
        else if (!strcmp(o, "--gpus"))
            parse_gpus(v, a);
        else if (!strcmp(o, "--jobs-per-gpu"))
            a->jobs_per_gpu = atoi(v);
        else if (!strcmp(o, "--gpu-mem-mb"))
            a->gpu_mem_mb = atol(v);
        else
            return -1;
    }
    if (a->warm_episodes < 0)
        a->warm_episodes = a->episodes;
    return a->replay && a->cache && a->episodes > 0 && a->turns > 0 ? 0 : -1;
}

int main(int argc, char **argv) {
    args a;
    if (parse_args(argc, argv, &a)) {
        fprintf(stderr, "usage: bench_rollout --replay DIR --cache-dir DIR [--suite S] "
                        "[--episodes 64] [--warm-episodes N] [--turns 3] [--gpus LIST|none] "
                        "[--compile-workers N] [--jobs-per-gpu N] [--gpu-mem-mb N] "
                        "[--trials N] [--problems-root DIR] [--modules DIR]\n");
        return 2;
    }
    pk_error err;
    pk_problem_set *set = NULL;
    if (pk_problem_set_load(a.root, a.modules, &set, &err)) {
        fprintf(stderr, "bench: %s\n", err.message);
        return 1;
    }
    const pk_problem *probs[256];
    int n = 0;
    for (size_t i = 0; i < pk_problem_set_count(set) && n < 256; i++) {
        const pk_problem *p = pk_problem_set_at(set, i);
        char path[1024];
        snprintf(path, sizeof path, "%s/%s/turn1.md", a.replay, pk_problem_id(p));
        if (!strcmp(pk_problem_suite(p), a.suite) && pk_path_exists(path))
            probs[n++] = p;
    }
    if (n == 0) {
        fprintf(stderr, "bench: no problem of suite %s has responses in %s\n", a.suite, a.replay);
        return 1;
    }
    /* What the scheduler reserves per GPU for one job of each (pk_job_device_mb). */
    printf("device memory estimate per job and GPU (MiB):");
    for (int i = 0; i < n; i++)
        printf(" %s=%ld", pk_problem_id(probs[i]),
               pk_job_device_mb(probs[i], pk_problem_world_size(probs[i])));
    printf("\n");
    pk_rm_rf(a.cache); /* the cold phase starts from an empty cache */
    void *zctx = zmq_ctx_new(), *pull = zmq_socket(zctx, ZMQ_PULL);
    int timeout_ms = 600000, zero = 0;
    zmq_setsockopt(pull, ZMQ_RCVTIMEO, &timeout_ms, sizeof timeout_ms);
    zmq_setsockopt(pull, ZMQ_RCVHWM, &zero, sizeof zero);
    zmq_bind(pull, "inproc://bench-done");
    pk_scheduler_opts o = {.zmq_ctx = zctx,
                           .done_endpoint = "inproc://bench-done",
                           .compile_workers = a.compile_workers,
                           .n_gpus = a.n_gpus,
                           .jobs_per_gpu = a.jobs_per_gpu,
                           .gpu_mem_mb = a.gpu_mem_mb,
                           .cache_dir = a.cache};
    memcpy(o.gpus, a.gpus, sizeof o.gpus);
    pk_scheduler *s = NULL;
    if (pk_scheduler_create(&o, &s, &err)) {
        fprintf(stderr, "bench: %s\n", err.message);
        return 1;
    }
    pk_scheduler_stats st;
    pk_scheduler_get_stats(s, &st);
    printf("%d episodes x %d turns over %d %s problems, responses from %s; %d jobs per GPU, "
           "%ld MiB per GPU for them (0: not counted)\n\n",
           a.episodes, a.turns, n, a.suite, a.replay, st.jobs_per_gpu, st.gpu_mem_mb);
    printf("| phase | steps | wall s | steps/s | compile pool busy | GPUs held | GPU kernel-busy "
           "| GPU timing (alone) | median step ms | p90 step ms | compile cache hits / misses "
           "| outcomes | launch+init share of run stages | lock wait per run ms | most jobs on "
           "one GPU |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    int rc = run_phase("cold", a.episodes, s, pull, &a, probs, n);
    if (!rc && a.warm_episodes)
        rc = run_phase("warm", a.warm_episodes, s, pull, &a, probs, n);
    pk_scheduler_free(s);
    zmq_close(pull);
    zmq_ctx_term(zctx);
    pk_problem_set_free(set);
    return rc;
}
