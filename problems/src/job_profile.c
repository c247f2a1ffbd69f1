/* The profile stage (docs/feedback.md, "Profiles"): after a run judged correct, two more runs
 * of pk-runner in the job's sandbox on the job's GPUs, each running the trials once, then one
 * warm-up call and one profiled call under the GPU locks held exclusively (--profile-call):
 *   1. the timeline: pk-cupti-trace.so injected (CUDA_INJECTION64_PATH) records the kernels,
 *      NCCL operations and copies of the profiled call on every rank;
 *   2. the metrics: the same run under Nsight Compute (ncu --csv --page raw), which replays
 *      each kernel of the profiled call to read its counters; NCCL kernels are left out (their
 *      replay would wait for the other ranks forever).
 * The verdict and the speedup were fixed by the timed run before this starts: nothing here
 * writes them. Failures are the profiler's (ours): res->profile says so, the step goes on. */
#define _GNU_SOURCE
#include "pk_job.h"
#include "pk_profile.h"

#include <dirent.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_PROFILE_S 120.0
#define TRACE_MAX_BYTES ((size_t)16 << 20)
#define TEXT_MAX_CHARS 1400
#define PROFILER_PIDS 1024

static double stage_limit_s(const pk_job *job, const pk_profile_budget *b) {
    if (job->opts.profile_timeout_s > 0)
        return job->opts.profile_timeout_s;
    return b ? b->seconds_each : DEFAULT_PROFILE_S;
}

/* The ncu to use: $PKGYM_NCU, else the toolkit's. */
static const char *ncu_path(void) {
    const char *env = getenv("PKGYM_NCU");
    return env && *env ? env : PK_CUDA_BIN "/ncu";
}

/* `ncu --query-metrics` once per process, to ask only for metrics this ncu knows. NULL when it
 * failed (the list is then used as is). */
static pthread_mutex_t g_query_mu = PTHREAD_MUTEX_INITIALIZER;
static char *g_query;
static int g_queried;

static const char *metric_query(void) {
    pthread_mutex_lock(&g_query_mu);
    if (!g_queried) {
        g_queried = 1;
        char cmd[700];
        snprintf(cmd, sizeof cmd, "timeout 60 '%s' --query-metrics 2>/dev/null", ncu_path());
        FILE *f = popen(cmd, "r");
        pk_strbuf b = {0};
        char buf[4096];
        size_t n;
        while (f && (n = fread(buf, 1, sizeof buf, f)) > 0 && b.len < ((size_t)4 << 20))
            pk_strbuf_append(&b, buf, n);
        int rc = f ? pclose(f) : -1;
        if (rc == 0 && b.data && strstr(b.data, "__"))
            g_query = b.data;
        else
            pk_strbuf_free(&b);
    }
    const char *q = g_query;
    pthread_mutex_unlock(&g_query_mu);
    return q;
}

/* A message into a fixed field, cut to fit. */
static void put(char *out, size_t cap, const char *s) {
    size_t n = strlen(s);
    if (n >= cap)
        n = cap - 1;
    memcpy(out, s, n);
    out[n] = 0;
}

static void tail_line(const char *s, char *out, size_t cap) {
    out[0] = 0;
    if (!s)
        return;
    /* The last non-empty line that says something (ncu's ==ERROR== lines first). */
    const char *err = strstr(s, "==ERROR==");
    const char *from = err ? err : s;
    size_t len = strlen(from);
    while (len > 0 && (from[len - 1] == '\n' || from[len - 1] == ' '))
        len--;
    const char *start = from;
    if (!err)
        for (const char *p = from; p < from + len; p++)
            if (*p == '\n')
                start = p + 1;
    size_t n = strcspn(start, "\n");
    snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), start);
}

/* One profiler run: the run stage's command with one trial, --skip-timing --profile-call, and
 * prefix (ncu and its options) in front; env_extra added to its environment. */
static int profile_run(pk_job *job, const char *launcher, const int *gpus, int n_gpus,
                       char *const *prefix, int n_prefix, const char *const *env_extra,
                       double limit_ms, char *why, size_t why_cap) {
    pk_job_launch *l = malloc(sizeof *l);
    char **argv = calloc(96, sizeof *argv);
    pk_error err;
    int ok = 0;
    if (!l || !argv) {
        snprintf(why, why_cap, "out of memory");
        goto done;
    }
    if (pk_job_build_launch(job, launcher, gpus, n_gpus, 0, l, &err)) {
        put(why, why_cap, err.message);
        goto done;
    }
    snprintf(l->trials, sizeof l->trials, "1");
    int n = 0;
    for (int i = 0; i < n_prefix; i++)
        argv[n++] = prefix[i];
    for (int i = 0; l->argv[i] && n < 92; i++)
        argv[n++] = l->argv[i];
    if (!job->opts.skip_timing)
        argv[n++] = "--skip-timing";
    argv[n++] = "--profile-call";
    argv[n] = NULL;
    size_t e = 0;
    while (l->env_add[e])
        e++;
    for (int i = 0; env_extra[i] && e + 1 < sizeof l->env_add / sizeof *l->env_add; i++)
        l->env_add[e++] = env_extra[i];
    l->env_add[e] = NULL;
    l->so.wall_ms = (int)limit_ms;
    l->so.deadline_ms = NULL;
    l->so.keep_tail = 1;
    /* ncu adds its frontend and threads in every rank to what the run has (default 256) */
    if (n_prefix > 0 && l->so.pids < PROFILER_PIDS)
        l->so.pids = PROFILER_PIDS;
    /* ... and runs from Nsight Compute's own directory, which the sandbox must show too. */
    char ncu_dirs[4][PATH_MAX];
    const char *ro[8 + 4];
    if (n_prefix > 0) {
        int n_ro = 0;
        for (int i = 0; i < l->so.n_ro && n_ro < 8; i++)
            ro[n_ro++] = l->so.ro[i];
        int nd = pk_profile_ncu_dirs(prefix[0], NULL, ncu_dirs, 4);
        for (int i = 0; i < nd; i++)
            ro[n_ro++] = ncu_dirs[i];
        l->so.ro = ro;
        l->so.n_ro = n_ro;
    }
    pk_sandbox_result sr;
    if (pk_harness_spawn(&l->so, argv, &sr, &err)) {
        put(why, why_cap, err.message);
        goto done;
    }
    if (sr.status == PK_SB_OK) {
        ok = 1;
    } else if (sr.status == PK_SB_TIMEOUT) {
        snprintf(why, why_cap, "timed out after %.0f s", limit_ms / 1e3);
    } else {
        char line[240];
        tail_line(sr.err && sr.err_len ? sr.err : sr.out, line, sizeof line);
        snprintf(why, why_cap, "%s (exit %d%s%s)", pk_sb_status_name(sr.status), sr.exit_code,
                 line[0] ? ": " : "", line);
    }
    pk_harness_spawn_free(&sr);
done:
    free(l);
    free(argv);
    return ok;
}

static int read_traces(const char *dir, pk_profile_data *d, char *why, size_t why_cap) {
    DIR *dh = opendir(dir);
    if (!dh) {
        snprintf(why, why_cap, "no trace directory");
        return 0;
    }
    int files = 0, ok = 1;
    struct dirent *de;
    while ((de = readdir(dh)) != NULL && ok) {
        if (strncmp(de->d_name, "trace.", 6))
            continue;
        char path[1200];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        char *text = NULL;
        size_t len;
        pk_error err;
        if (pk_read_file_untrusted(path, TRACE_MAX_BYTES, &text, &len, &err) ||
            pk_profile_trace_parse(text, d, &err)) {
            put(why, why_cap, err.message);
            ok = 0;
        }
        free(text);
        files++;
    }
    closedir(dh);
    if (!ok) { /* nothing of a timeline that did not parse is kept */
        free(d->iv);
        d->iv = NULL;
        d->n_iv = 0;
    }
    if (ok && !files)
        snprintf(why, why_cap, "the tracing library wrote nothing (not loaded)");
    if (ok && files && d->n_iv == 0)
        snprintf(why, why_cap, "no GPU operation was recorded in the profiled call");
    return ok && files && d->n_iv > 0;
}

void pk_job_profile(pk_job *job, const int *gpus, int n_gpus, pk_eval_result *res) {
    pk_profile_result *pr = &res->profile;
    pr->level = job->opts.profile;
    if (job->opts.profile <= PK_PROFILE_NONE)
        return;
    if (res->status != PK_STATUS_CORRECT) {
        snprintf(pr->status, sizeof pr->status, "skipped");
        snprintf(pr->reason, sizeof pr->reason,
                 "not correct (only correct candidates are profiled)");
        return;
    }
    /* The budget counts every correct candidate that reaches the stage, a host problem's too
     * (then skipped: nothing of it runs on a GPU); an incorrect one takes nothing. */
    pk_profile_budget *b = job->opts.profile_budget;
    double t0 = pk_now_ms();
    if (b && !pk_profile_budget_take(b, t0)) {
        snprintf(pr->status, sizeof pr->status, "skipped");
        snprintf(pr->reason, sizeof pr->reason, "budget (%d profiles per minute on this server)",
                 b->per_minute);
        return;
    }
    /* PKGYM_PROFILE_HOST_PROBLEMS=1 (tests of the stage on CPU machines, with a stand-in for
     * ncu: tests/problems/profile_fake_ncu.sh): host problems go through it too. */
    const char *host = getenv("PKGYM_PROFILE_HOST_PROBLEMS");
    if (!job->p->device_gpu && !(host && !strcmp(host, "1"))) {
        snprintf(pr->status, sizeof pr->status, "skipped");
        snprintf(pr->reason, sizeof pr->reason, "host problem (nothing runs on a GPU)");
        return;
    }
    double limit_ms = stage_limit_s(job, b) * 1e3;
    /* Each run holds the GPU locks exclusively for its profiled call; another job waiting for
     * them is credited at most one run limit (job_watch.c): no profiler run may outlast 3/4
     * of it, or a kernel that cannot be replayed would time out its neighbours. */
    double run_cap_ms = 0.75 * pk_run_timeout_ms(&job->opts);
    const char *launcher = res->launcher[0] ? res->launcher : job->p->launcher;
    pk_profile_data d;
    memset(&d, 0, sizeof d);
    d.level = job->opts.profile;
    d.world = job->world;
    pk_problem_sizes sz;
    pk_error serr;
    if (pk_problem_sizes_at(job->p, job->world, &sz, &serr) == PK_OK)
        for (int i = 0; i < job->p->n_phases; i++)
            d.roofline_nvlink_bytes += sz.nvlink_bytes[i];

    char dir[700], trace_env[760], inject_env[620], lib[560], runner[512];
    snprintf(dir, sizeof dir, "%s/profile", job->dir);
    pk_error err;
    if (pk_mkdir_p(dir, &err)) {
        snprintf(pr->status, sizeof pr->status, "error");
        snprintf(pr->reason, sizeof pr->reason, "profiler: %.300s", err.message);
        return;
    }
    snprintf(runner, sizeof runner, "%s", job->paths.runner);
    snprintf(lib, sizeof lib, "%s/pk-cupti-trace.so", dirname(runner));

    /* 1. The timeline. */
    if (access(lib, R_OK) != 0) {
        snprintf(d.trace_error, sizeof d.trace_error, "pk-cupti-trace.so is not built (%.100s)",
                 lib);
    } else {
        snprintf(trace_env, sizeof trace_env, "PKGYM_PROFILE_TRACE_DIR=%s", dir);
        snprintf(inject_env, sizeof inject_env, "CUDA_INJECTION64_PATH=%s", lib);
        const char *env[] = {trace_env, inject_env, NULL};
        if (profile_run(job, launcher, gpus, n_gpus, NULL, 0, env,
                        limit_ms < run_cap_ms ? limit_ms : run_cap_ms, d.trace_error,
                        sizeof d.trace_error))
            d.trace_ok = read_traces(dir, &d, d.trace_error, sizeof d.trace_error);
    }

    /* 2. The metrics, with what is left of the stage's limit. */
    double left_ms = limit_ms - (pk_now_ms() - t0);
    const char *ncu = ncu_path();
    char metrics[2048], log_path[760], log_arg[780];
    snprintf(log_path, sizeof log_path, "%s/ncu.csv", dir);
    if (left_ms < 5000) {
        snprintf(d.ncu_error, sizeof d.ncu_error, "no time left within the profile's limit");
    } else if (access(ncu, X_OK) != 0) {
        snprintf(d.ncu_error, sizeof d.ncu_error, "ncu not found at %s (PKGYM_NCU)", ncu);
    } else if (pk_profile_ncu_metrics(d.level, metric_query(), metrics, sizeof metrics) <= 0) {
        snprintf(d.ncu_error, sizeof d.ncu_error, "this ncu knows none of the metrics");
    } else {
        snprintf(log_arg, sizeof log_arg, "%s", log_path);
        const char *filter = getenv("PKGYM_PROFILE_NCU_FILTER");
        if (!filter)
            filter = "regex:^(?!nccl)";
        char *prefix[40];
        int np = 0;
        const char *fixed[] = {ncu, "--csv", "--page", "raw", "--print-units", "base", "--log-file",
                               log_arg, "--profile-from-start", "off", "--target-processes", "all",
                               /* the GPU's clocks stay as they are: other jobs share it */
                               "--clock-control", "none", "--metrics", metrics};
        for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++)
            prefix[np++] = (char *)fixed[i];
        if (*filter) {
            prefix[np++] = "--kernel-name";
            prefix[np++] = (char *)filter;
        }
        /* PKGYM_PROFILE_NCU_ARGS: more ncu options, space-separated (measurements only). */
        char extra[512];
        snprintf(extra, sizeof extra, "%s", getenv("PKGYM_PROFILE_NCU_ARGS") ?: "");
        char *save = NULL;
        for (char *t = strtok_r(extra, " ", &save); t && np < 38; t = strtok_r(NULL, " ", &save))
            prefix[np++] = t;
        /* PKGYM_PROFILE_RANK_TMPDIR=1 (measurements): one ncu lock file per rank (rank.c). */
        const char *rank_tmp = getenv("PKGYM_PROFILE_RANK_TMPDIR");
        const char *env[] = {
            rank_tmp && !strcmp(rank_tmp, "1") ? "PKGYM_PROFILE_RANK_TMPDIR=1" : NULL, NULL};
        int ran = profile_run(job, launcher, gpus, n_gpus, prefix, np, env,
                              left_ms < run_cap_ms ? left_ms : run_cap_ms, d.ncu_error,
                              sizeof d.ncu_error);
        char *text = NULL;
        size_t len;
        int read = pk_read_file_untrusted(log_path, TRACE_MAX_BYTES, &text, &len, &err) == PK_OK;
        /* ncu lists NVLink's counters but may not let a process read them (seen on one H200:
         * "Unable to access the following 8 metrics: nvlrx__bytes..."), and then profiles no
         * kernel at all: once more without them, within what is left of the limit. */
        if (!ran && pk_profile_ncu_inaccessible(d.ncu_error, read ? text : NULL) &&
            pk_profile_drop_nvlink(metrics) > 0) {
            left_ms = limit_ms - (pk_now_ms() - t0);
            free(text);
            text = NULL;
            d.nvlink_inaccessible = 1;
            d.ncu_error[0] = 0;
            ran = left_ms >= 5000 && profile_run(job, launcher, gpus, n_gpus, prefix, np, env,
                                                 left_ms < run_cap_ms ? left_ms : run_cap_ms,
                                                 d.ncu_error, sizeof d.ncu_error);
            if (left_ms < 5000)
                snprintf(d.ncu_error, sizeof d.ncu_error,
                         "no time left within the profile's limit");
            read = pk_read_file_untrusted(log_path, TRACE_MAX_BYTES, &text, &len, &err) == PK_OK;
        }
        /* Even when ncu did not finish (a kernel it could not replay ran into the limit), the
         * kernels it profiled before are in its log if it wrote them: kept, and said so. */
        int n_before = d.n_kernels;
        read = read && pk_profile_ncu_csv_parse(text, &d, &err) == PK_OK;
        if (read && d.n_kernels > n_before) {
            d.ncu_ok = 1;
            if (!ran) {
                char why[sizeof d.ncu_error];
                snprintf(why, sizeof why, "%s", d.ncu_error);
                snprintf(d.ncu_error, sizeof d.ncu_error,
                         "incomplete, only the kernels profiled before ncu stopped: %.200s", why);
            }
        } else if (ran) {
            put(d.ncu_error, sizeof d.ncu_error,
                read ? "ncu profiled no kernel of the call" : err.message);
        }
        free(text);
    }
    if (d.world < job->world)
        d.world = job->world;
    pr->cost_s = (pk_now_ms() - t0) / 1e3;
    int whole_ncu = d.ncu_ok && !d.ncu_error[0]; /* not cut short */
    snprintf(pr->status, sizeof pr->status, "%s",
             d.trace_ok && whole_ncu  ? "ok"
             : d.trace_ok || d.ncu_ok ? "partial"
                                      : "error");
    if (!d.trace_ok || !whole_ncu) {
        pk_strbuf why = {0};
        if (!d.trace_ok)
            pk_strbuf_printf(&why, "timeline: %s", d.trace_error);
        if (!whole_ncu)
            pk_strbuf_printf(&why, "%smetrics: %s", d.trace_ok ? "" : "; ", d.ncu_error);
        put(pr->reason, sizeof pr->reason, why.data ? why.data : "");
        pk_strbuf_free(&why);
    }
    if (d.trace_ok || d.ncu_ok)
        pr->text = pk_profile_feedback_text(&d, TEXT_MAX_CHARS);
    pr->raw = pk_profile_data_to_json(&d);
    pk_profile_data_free(&d);
}
