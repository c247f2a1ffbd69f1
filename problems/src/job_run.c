/* The run stage: every rank of the job in one sandbox, through pk-runner. Cold: started and
 * waited for by pk_job_run. Warm (pk_job_warm): started on a background thread before the
 * compile ends; the ranks set up the devices, communicators and arena, then wait for the
 * go marker pk_job_run writes (or the abort marker pk_job_warm_abort writes). */
#define _GNU_SOURCE
#include "pk_job.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WARM_ABORT_GRACE_MS 3000 /* ranks see abort within ms; then the sandbox kills them */

static int check_run_args(pk_job *job, int n_gpus, const char **launcher, pk_error *err) {
    const pk_problem *p = job->p;
    if (n_gpus && n_gpus != job->world)
        return pk_error_set(err, PK_ERR_INVALID, "%s: %d GPUs given for world size %d", p->id,
                            n_gpus, job->world);
    *launcher = job->opts.launcher ? job->opts.launcher : p->launcher;
    if (strcmp(*launcher, "fork") != 0 && strcmp(*launcher, "mpi") != 0)
        return pk_error_set(err, PK_ERR_INVALID, "unknown launcher %s", *launcher);
    if (!p->device_gpu && strcmp(*launcher, "mpi") != 0)
        return pk_error_set(err, PK_ERR_INVALID, "%s: host problems need the mpi launcher", p->id);
    return PK_OK;
}

/* The secret seed goes to the runner in a file it reads and removes before any candidate code
 * is loaded: on the command line it would sit in the process's memory as argv. */
static int write_seed(const pk_job *job, pk_job_launch *l, pk_error *err) {
    char text[24];
    int n = snprintf(text, sizeof text, "%llu", (unsigned long long)job->seed);
    snprintf(l->seed_path, sizeof l->seed_path, "%s/seed", job->dir);
    int fd = open(l->seed_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return pk_error_errno(err, PK_ERR_IO, "cannot write %s", l->seed_path);
    int ok = write(fd, text, (size_t)n) == n;
    close(fd);
    return ok ? PK_OK : pk_error_errno(err, PK_ERR_IO, "cannot write %s", l->seed_path);
}

/* The GPU locks this run takes (docs/problems.md, "Sharing GPUs"): a GPU problem its GPUs, a
 * host problem the gpus it was given (none by default). Makes the files and binds each one
 * read-write into the sandbox, so a job can neither remove nor replace another GPU's lock. */
static int set_locks(pk_job *job, const int *gpus, int n_gpus, pk_job_launch *l, pk_error *err) {
    int ids[PK_MAX_RANKS], n = 0;
    if (job->opts.no_locks)
        return PK_OK;
    if (job->p->device_gpu)
        for (int i = 0; i < job->world; i++)
            ids[n++] = l->gpus[i];
    else
        for (int i = 0; i < n_gpus && i < PK_MAX_RANKS; i++)
            ids[n++] = gpus[i];
    if (n == 0)
        return PK_OK;
    if (job->opts.lock_dir)
        snprintf(l->lock_dir, sizeof l->lock_dir, "%s", job->opts.lock_dir);
    else
        pk_gpu_lock_dir_default(l->lock_dir, sizeof l->lock_dir);
    int rc = pk_gpu_locks_prepare(l->lock_dir, ids, n, err);
    if (rc)
        return rc;
    size_t used = 0;
    for (int i = 0; i < n; i++) {
        used += (size_t)snprintf(l->lock_ids + used, sizeof l->lock_ids - used, "%s%d",
                                 i ? "," : "", ids[i]);
        if (used >= sizeof l->lock_ids)
            return pk_error_set(err, PK_ERR_INVALID, "too many GPU locks");
        for (int k = 0; k < 2; k++) {
            char *f = l->lock_files[2 * i + k];
            snprintf(f, sizeof l->lock_files[0], "%s/gpu%d.%s", l->lock_dir, ids[i],
                     k ? "lock" : "turnstile");
            l->rw[l->so.n_rw++] = f;
        }
    }
    l->so.rw = l->rw;
    l->locked = 1;
    return PK_OK;
}

/* Tests of the infra_error path (docs/sandbox.md): the operator's environment, never the
 * candidate's, makes a run's set-up fail. PKGYM_FAKE_SETUP_FAILURES=N: the first N runs of
 * this process; PKGYM_FAKE_SETUP_FAILURE_GPUS=LIST: every run on one of those GPUs. */
static int fake_setup_failure(const int *gpus, int n_gpus) {
    static int runs;
    const char *first = getenv("PKGYM_FAKE_SETUP_FAILURES");
    if (first && *first && __atomic_fetch_add(&runs, 1, __ATOMIC_SEQ_CST) < atoi(first))
        return 1;
    const char *list = getenv("PKGYM_FAKE_SETUP_FAILURE_GPUS");
    for (const char *t = list; t && *t;) {
        char *end;
        long v = strtol(t, &end, 10);
        if (end == t)
            break;
        for (int i = 0; i < n_gpus; i++)
            if (gpus[i] == v)
                return 1;
        t = *end == ',' ? end + 1 : end;
    }
    return 0;
}

/* A run again on the same job (the scheduler's retry after infra_error) must not read the
 * markers and result of the earlier one. */
static void remove_run_markers(const pk_job *job) {
    char path[700];
    for (int r = 0; r < job->world; r++) {
        snprintf(path, sizeof path, "%s/rank%d.progress", job->dir, r);
        unlink(path);
        snprintf(path, sizeof path, "%s/rank%d.crash", job->dir, r);
        unlink(path);
    }
    snprintf(path, sizeof path, "%s/go", job->dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/abort", job->dir);
    unlink(path);
    unlink(job->result_path);
}

int pk_job_build_launch(pk_job *job, const char *launcher, const int *gpus, int n_gpus, int warm,
                        pk_job_launch *l, pk_error *err) {
    const pk_problem *p = job->p;
    memset(l, 0, sizeof *l);
    remove_run_markers(job);
    snprintf(l->world, sizeof l->world, "%d", job->world);
    snprintf(l->trials, sizeof l->trials, "%d", job->trials);
    int rc = write_seed(job, l, err);
    if (rc)
        return rc;
    snprintf(l->module_arg, sizeof l->module_arg, "%s", p->module_path ? p->module_path : "");
    int n = 0;
    if (!strcmp(launcher, "mpi")) {
        const char *mpi[] = {PK_MPIRUN, "-np", l->world, "--oversubscribe", "--bind-to", "none"};
        for (size_t i = 0; i < sizeof mpi / sizeof *mpi; i++)
            l->argv[n++] = (char *)mpi[i];
    }
    const char *args[] = {
        job->paths.runner, "--problem-dir",  p->dir,        "--suite",     p->suite,     "--name",
        p->name,           "--module",       l->module_arg, "--seed-file", l->seed_path, "--trials",
        l->trials,         "--world",        l->world,      "--launcher",  launcher,     "--out",
        job->result_path,  "--progress-dir", job->dir};
    for (size_t i = 0; i < sizeof args / sizeof *args; i++)
        l->argv[n++] = (char *)args[i];
    if (job->opts.reference_as_candidate) {
        l->argv[n++] = "--reference-as-candidate";
    } else {
        l->argv[n++] = "--candidate";
        l->argv[n++] = job->so_path;
    }
    if (job->opts.skip_timing)
        l->argv[n++] = "--skip-timing";
    if (job->opts.baseline_us > 0)
        l->argv[n++] = "--skip-reference-timing";
    if (warm)
        l->argv[n++] = "--wait-go";
    if (job->opts.dump_dir) {
        l->argv[n++] = "--dump";
        l->argv[n++] = (char *)job->opts.dump_dir;
    }
    if (job->opts.dims) {
        l->argv[n++] = "--dims";
        l->argv[n++] = (char *)job->opts.dims;
    }
    if (job->opts.regime) {
        l->argv[n++] = "--regime";
        l->argv[n++] = (char *)job->opts.regime;
    }
    /* Measurements only: free CUDA and NCCL resources before exiting (slower). */
    const char *teardown = getenv("PKGYM_RUNNER_TEARDOWN");
    if (teardown && !strcmp(teardown, "1"))
        l->argv[n++] = "--teardown";
    /* Set-up (CUDA context, communicator, arena) holds the GPU locks shared, out of other
     * jobs' timing; PKGYM_LOCK_SETUP=0 (measurements only) lets it overlap. */
    const char *lock_setup = getenv("PKGYM_LOCK_SETUP");
    if (!lock_setup || strcmp(lock_setup, "0") != 0)
        l->argv[n++] = "--lock-setup";
    /* Each rank sees only its own GPU (issue 30, lever 1): the runner narrows the sandbox's
     * CUDA_VISIBLE_DEVICES per rank; the device nodes and locks stay the job's. */
    if (p->device_gpu && pk_rank_visibility_of(&job->opts) == PK_RANK_VISIBILITY_OWN) {
        l->argv[n++] = "--rank-visibility";
        l->argv[n++] = "own";
    }
    /* Measurements only: the ranks' exit (the driver freeing contexts) under the locks too. It
     * made no measurable difference (bench/results/gpu-pass-2026-11-23b-h200x2.md), so it is off.
     */
    const char *lock_exit = getenv("PKGYM_LOCK_EXIT");
    if (lock_exit && !strcmp(lock_exit, "1"))
        l->argv[n++] = "--lock-exit";

    /* The sandbox's default environment (PATH, HOME, CUDA_VISIBLE_DEVICES for the bound GPUs,
     * NCCL_SOCKET_IFNAME=lo, NCCL_NVLS_ENABLE=0, Open MPI as root without CMA) plus ours. */
    const char *env_add[] = {"NCCL_NVLS_ENABLE=0", "NCCL_SOCKET_IFNAME=lo",
                             "OMPI_MCA_btl=self,vader",
                             /* one-sided MPI: osc/rdma needs the single-copy mechanism the
                              * sandbox turns off; Open MPI 4's pt2pt works without it */
                             "OMPI_MCA_osc=^rdma",
                             /* mpirun needs an rsh agent to exist even for local ranks */
                             "OMPI_MCA_plm_rsh_agent=false", "ASAN_OPTIONS=detect_leaks=0",
                             /* host jobs see no /sys: hwloc would warn on every rank */
                             "HWLOC_HIDE_ERRORS=2"};
    size_t n_env = 0;
    for (; n_env < sizeof env_add / sizeof *env_add; n_env++)
        l->env_add[n_env] = env_add[n_env];
    /* Diagnostics for GPU jobs, passed through from the harness's environment. */
    const char *dbg = getenv("PKGYM_NCCL_DEBUG");
    if (dbg && *dbg) {
        snprintf(l->nccl_debug, sizeof l->nccl_debug, "NCCL_DEBUG=%s", dbg);
        l->env_add[n_env++] = l->nccl_debug;
    }
    const char *subsys = getenv("PKGYM_NCCL_DEBUG_SUBSYS"); /* e.g. P2P,SHM,NET: transports */
    if (subsys && *subsys) {
        snprintf(l->nccl_subsys, sizeof l->nccl_subsys, "NCCL_DEBUG_SUBSYS=%s", subsys);
        l->env_add[n_env++] = l->nccl_subsys;
    }
    l->env_add[n_env] = NULL;
    pk_sandbox_opts *so = &l->so;
    so->wall_ms = pk_run_timeout_ms(&job->opts);
    if (warm) /* covers the wait for the compile; pk_job_run then bounds the run itself */
        so->wall_ms += pk_compile_timeout_ms(&job->opts);
    so->workdir = job->dir;
    so->env_add = l->env_add;
    so->ro = job->ro;
    so->n_ro = job->n_ro;
    so->hide = job->hide;
    so->n_hide = 1;
    if (job->opts.dump_dir) { /* the only host path a run may write, and only when asked */
        l->rw[so->n_rw++] = job->opts.dump_dir;
        so->rw = l->rw;
        so->fsize_mb = 1 << 16; /* one array of a large problem exceeds the 256 MiB default */
    }
    so->output_cap = 16 * 1024;
    so->n_gpus = 0;
    if (p->device_gpu) {
        for (int i = 0; i < job->world; i++)
            l->gpus[i] = n_gpus ? gpus[i] : i;
        so->gpus = l->gpus;
        so->n_gpus = job->world;
    }
    rc = set_locks(job, gpus, n_gpus, l, err);
    if (rc)
        return rc;
    if (fake_setup_failure(p->device_gpu ? l->gpus : gpus, p->device_gpu ? job->world : n_gpus))
        l->argv[n++] = "--fake-setup-failure";
    if (l->locked) {
        l->argv[n++] = "--lock-dir";
        l->argv[n++] = l->lock_dir;
        l->argv[n++] = "--lock-ids";
        l->argv[n++] = l->lock_ids;
        /* Waits for other jobs' locks are credited, up to one more run limit (job_watch.c);
         * the watcher's deadline enforces the run limit itself. */
        so->wall_ms += pk_run_timeout_ms(&job->opts);
    }
    l->argv[n] = NULL;
    return PK_OK;
}

static void *warm_main(void *arg) {
    pk_job_warm_state *w = arg;
    w->spawn_rc = pk_harness_spawn(&w->launch.so, w->launch.argv, &w->sr, &w->spawn_err);
    return NULL;
}

static int touch(const pk_job *job, const char *name, pk_error *err) {
    char path[700];
    snprintf(path, sizeof path, "%s/%s", job->dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return pk_error_errno(err, PK_ERR_IO, "cannot write %s", path);
    close(fd);
    return PK_OK;
}

static void warm_join(pk_job *job, pk_eval_result *res) {
    pk_job_warm_state *w = job->warm;
    pthread_join(w->thread, NULL);
    pk_run_watch_stop(&w->watch);
    if (res)
        res->stages.run_warm_ms = (w->t_go > 0 ? w->t_go : pk_now_ms()) - w->t_start;
}

static void warm_free(pk_job *job) {
    pk_harness_spawn_free(&job->warm->sr);
    pthread_mutex_destroy(&job->warm->watch.mu);
    free(job->warm);
    job->warm = NULL;
}

/* What ended a run that timed out, for the classifier. */
static void note_bound(pk_job *job, pk_run_watch *w) {
    job->timeout_bound =
        pk_run_watch_fired(w, pk_now_ms(), &job->timeout_budget_ms, &job->lock_credit_ms);
    job->timeout_expect_ms = pk_run_watch_expect_ms(w);
}

int pk_job_warm(pk_job *job, const int *gpus, int n_gpus, pk_error *err) {
    if (job->warm)
        return pk_error_set(err, PK_ERR_INVALID, "pk_job_warm: the job is already warm");
    const char *launcher; /* job->failed is not read: a compile may be setting it now */
    int rc = check_run_args(job, n_gpus, &launcher, err);
    if (rc)
        return rc;
    pk_job_warm_state *w = calloc(1, sizeof *w);
    if (!w)
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    rc = pk_job_build_launch(job, launcher, gpus, n_gpus, 1, &w->launch, err);
    if (rc) {
        free(w);
        return rc;
    }
    w->launch.so.deadline_ms = &w->deadline;
    w->t_start = pk_now_ms();
    /* No watcher thread: no phase budgets, the wall limit still holds. */
    pk_run_watch_start(&w->watch, job->p, pk_run_timeout_ms(&job->opts), job->dir, w->launch.locked,
                       &w->deadline);
    if (pthread_create(&w->thread, NULL, warm_main, w) != 0) {
        pk_run_watch_stop(&w->watch);
        pthread_mutex_destroy(&w->watch.mu);
        free(w);
        return pk_error_set(err, PK_ERR_SYSTEM, "cannot start the warm run's thread");
    }
    job->warm = w;
    return PK_OK;
}

int pk_job_is_warm(const pk_job *job) {
    return job->warm != NULL;
}

void pk_job_warm_abort(pk_job *job) {
    if (!job->warm)
        return;
    pk_error e;
    if (touch(job, "abort", &e) == PK_OK)
        pk_run_watch_abort(&job->warm->watch, pk_now_ms() + WARM_ABORT_GRACE_MS);
    else
        pk_run_watch_abort(&job->warm->watch, pk_now_ms()); /* no marker: kill the ranks now */
    warm_join(job, NULL);
    warm_free(job);
}

static int run_warm(pk_job *job, const int *gpus, int n_gpus, pk_eval_result *res, pk_error *err) {
    pk_job_warm_state *w = job->warm;
    const pk_job_launch *l = &w->launch;
    if (job->p->device_gpu)
        for (int i = 0; i < job->world; i++)
            if (l->gpus[i] != (n_gpus ? gpus[i] : i)) {
                pk_job_warm_abort(job);
                return pk_error_set(err, PK_ERR_INVALID,
                                    "pk_job_run: GPUs differ from those the job was warmed on");
            }
    if (!job->opts.reference_as_candidate && access(job->so_path, R_OK) != 0) {
        pk_job_warm_abort(job);
        return pk_error_set(err, PK_ERR_INVALID, "pk_job_run: compiled object %s is missing",
                            job->so_path);
    }
    w->t_go = pk_now_ms();
    pk_run_watch_set_base(&w->watch, w->t_go); /* bounded from go */
    int rc = touch(job, "go", err);
    if (rc) {
        pk_job_warm_abort(job);
        return rc;
    }
    warm_join(job, res);
    note_bound(job, &w->watch);
    rc = w->spawn_rc;
    if (rc) {
        *err = w->spawn_err;
        warm_free(job);
        return rc;
    }
    res->stages.run_ms = pk_now_ms() - w->t_go;
    w->sr.wall_ms = res->stages.run_ms; /* what the verdict reports: the run from go */
    rc = pk_job_classify_run(job, &w->sr, res, err);
    warm_free(job);
    if (rc == PK_OK)
        pk_job_profile(job, gpus, n_gpus, res);
    return rc;
}

int pk_job_run(pk_job *job, const int *gpus, int n_gpus, pk_eval_result *res, pk_error *err) {
    if (job->failed) {
        pk_job_warm_abort(job);
        return PK_OK;
    }
    if (!job->compiled) {
        pk_job_warm_abort(job);
        return pk_error_set(err, PK_ERR_INVALID, "pk_job_run: nothing compiled");
    }
    const char *launcher;
    int rc = check_run_args(job, n_gpus, &launcher, err);
    if (rc) {
        pk_job_warm_abort(job);
        return rc;
    }
    snprintf(res->launcher, sizeof res->launcher, "%s", launcher);
    if (job->warm)
        return run_warm(job, gpus, n_gpus, res, err);
    pk_job_launch *l = malloc(sizeof *l);
    if (!l)
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    rc = pk_job_build_launch(job, launcher, gpus, n_gpus, 0, l, err);
    if (rc) {
        free(l);
        return rc;
    }
    pk_sandbox_result sr;
    pk_run_watch watch;
    double deadline = 0;
    pk_run_watch_start(&watch, job->p, pk_run_timeout_ms(&job->opts), job->dir, l->locked,
                       &deadline);
    if (l->locked) { /* the run limit (plus lock-wait credit) is the watcher's deadline */
        l->so.deadline_ms = &deadline;
        pk_run_watch_set_base(&watch, pk_now_ms());
    }
    rc = pk_harness_spawn(&l->so, l->argv, &sr, err);
    pk_run_watch_stop(&watch);
    note_bound(job, &watch);
    pthread_mutex_destroy(&watch.mu);
    free(l);
    res->stages.run_ms = sr.wall_ms;
    if (rc == PK_OK)
        rc = pk_job_classify_run(job, &sr, res, err);
    pk_harness_spawn_free(&sr);
    if (rc == PK_OK)
        pk_job_profile(job, gpus, n_gpus, res);
    return rc;
}
