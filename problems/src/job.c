/* Evaluation jobs: prepare (job dir, source), compile (compile.c), run (pk-runner through the
 * sandbox), and pk_harness_evaluate, which runs them all. */
#define _GNU_SOURCE
#include "pk_job.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

static atomic_uint job_counter;

static void default_root(char *out, size_t cap) {
    const char *tmp = getenv("TMPDIR");
    snprintf(out, cap, "%s/pkgym-jobs", tmp && *tmp ? tmp : "/tmp");
}

/* A process that makes job directories under root holds an exclusive lock on root/job-PID.owner
 * for as long as it lives: the kernel drops it when the process dies, however it dies (and in
 * any PID namespace), which is how pk_job_reap_orphans tells a dead owner from a live one. */
#define PK_OWNER_ROOTS 16 /* roots a process locks; past that, its PID alone tells */

static void hold_owner_lock(const char *root) {
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static char held[PK_OWNER_ROOTS][512];
    static int n_held;
    static pid_t held_pid;
    pthread_mutex_lock(&mu);
    if (held_pid != getpid()) { /* a forked child holds none of its parent's locks */
        n_held = 0;
        held_pid = getpid();
    }
    int have = 0;
    for (int i = 0; i < n_held && !have; i++)
        have = strcmp(held[i], root) == 0;
    if (!have && n_held < PK_OWNER_ROOTS) {
        char path[600];
        snprintf(path, sizeof path, "%s/job-%d.owner", root, (int)getpid());
        int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        /* Blocking: a reaper holds it only for the instant it tests it; never one of ours
         * (each root is locked once, through one descriptor that stays open). */
        if (fd >= 0 && flock(fd, LOCK_EX) == 0)
            snprintf(held[n_held++], sizeof held[0], "%s", root);
        else if (fd >= 0)
            close(fd);
    }
    pthread_mutex_unlock(&mu);
}

/* 1 when the process that made job directories job-PID-* under root has exited. */
static int owner_gone(const char *root, int pid) {
    if (pid == (int)getpid())
        return 0;
    char path[600];
    snprintf(path, sizeof path, "%s/job-%d.owner", root, pid);
    int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) /* no lock file (made before it existed): the PID alone */
        return kill(pid, 0) != 0 && errno == ESRCH;
    int gone = flock(fd, LOCK_EX | LOCK_NB) == 0;
    close(fd);
    return gone;
}

int pk_job_reap_orphans(const char *work_root) {
    char root[512];
    if (work_root)
        snprintf(root, sizeof root, "%s", work_root);
    else
        default_root(root, sizeof root);
    int removed = 0;
    struct stat st;
    /* Only a directory of ours that no one else can write to (pk_mkdir_private made it). */
    if (lstat(root, &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
        (st.st_mode & 0077))
        return 0;
    DIR *d = opendir(root);
    if (!d)
        return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        int pid = 0, end = 0;
        unsigned n, tag;
        char path[800], keep[820];
        snprintf(path, sizeof path, "%s/%s", root, e->d_name);
        snprintf(keep, sizeof keep, "%s/.keep", path);
        if (lstat(path, &st) != 0 || st.st_uid != geteuid())
            continue;
        int job_dir = sscanf(e->d_name, "job-%d-%u-%8x%n", &pid, &n, &tag, &end) == 3 && end > 0 &&
                      e->d_name[end] == '\0' && S_ISDIR(st.st_mode);
        if (!job_dir) {
            end = 0;
            int owner_file = sscanf(e->d_name, "job-%d.owner%n", &pid, &end) == 1 && end > 0 &&
                             e->d_name[end] == '\0' && S_ISREG(st.st_mode);
            if (owner_file && pid > 0 && owner_gone(root, pid))
                unlink(path);
            continue;
        }
        if (pid > 0 && access(keep, F_OK) != 0 && owner_gone(root, pid) && pk_rm_rf(path) == 0)
            removed++;
    }
    closedir(d);
    return removed;
}

static void compute_key(pk_job *job, const char *source) {
    pk_sha256 h;
    uint8_t d[32];
    pk_sha256_init(&h);
    pk_sha256_update(&h, source, strlen(source) + 1);
    pk_sha256_update(&h, job->flags, strlen(job->flags) + 1);
    pk_sha256_update(&h, PK_CUDA_VERSION, sizeof PK_CUDA_VERSION);
    pk_sha256_update(&h, PK_HARNESS_VERSION, sizeof PK_HARNESS_VERSION);
    pk_sha256_final(&h, d);
    for (int i = 0; i < 32; i++)
        snprintf(job->compile_key + 2 * i, 3, "%02x", d[i]);
}

int pk_job_create(const pk_problem *p, const char *source, const pk_eval_opts *opts, pk_job **out,
                  pk_eval_result *res, pk_error *err) {
    double t0 = pk_now_ms();
    pk_job *job = calloc(1, sizeof *job);
    if (!job)
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    job->p = p;
    if (opts)
        job->opts = *opts;
    pk_harness_paths_get(&job->paths);
    job->world = job->opts.world_size ? job->opts.world_size : p->world_size;
    job->trials = job->opts.trials ? job->opts.trials : p->trials;
    job->seed = job->opts.seed;
    if (!job->seed && getrandom(&job->seed, sizeof job->seed, 0) != sizeof job->seed)
        job->seed = pk_now_ns() ^ (uint64_t)getpid() << 32;
    res->world_size = job->world;
    res->trials_planned = job->trials;
    snprintf(res->launcher, sizeof res->launcher, "%s",
             job->opts.launcher ? job->opts.launcher : p->launcher);
    if (!pk_problem_world_admitted(p, job->world, job->opts.reference_as_candidate) ||
        job->trials < 1 || job->trials > PK_EVAL_MAX_TRIALS) {
        int world = job->world, trials = job->trials;
        free(job);
        return pk_error_set(err, PK_ERR_INVALID, "%s: world size %d or trials %d not allowed",
                            p->id, world, trials);
    }
    const char *root = job->opts.work_root;
    char def_root[512];
    if (!root) {
        default_root(def_root, sizeof def_root);
        root = def_root;
    }
    uint32_t tag; /* unique among servers sharing the root; not derived from the secret seed */
    if (getrandom(&tag, sizeof tag, 0) != sizeof tag)
        tag = (uint32_t)pk_now_ns();
    snprintf(job->dir, sizeof job->dir, "%s/job-%d-%u-%08x", root, (int)getpid(),
             atomic_fetch_add(&job_counter, 1), (unsigned)tag);
    snprintf(job->src_path, sizeof job->src_path, "%s/candidate.cu", job->dir);
    snprintf(job->so_path, sizeof job->so_path, "%s/candidate.so", job->dir);
    snprintf(job->result_path, sizeof job->result_path, "%s/result.msgpack", job->dir);
    pk_job_compile_flags(job, job->flags, sizeof job->flags);
    /* The sandbox shows only the toolchain and system libraries: add the harness's files. */
    snprintf(job->runner_dir, sizeof job->runner_dir, "%s", job->paths.runner);
    char *slash = strrchr(job->runner_dir, '/');
    if (slash && slash != job->runner_dir)
        *slash = 0;
    /* Of the problems, only this one's directory (the runner reads its meta.json), and not its
     * solutions/: a host candidate reads whatever the sandbox shows (MPI-IO), and the whole
     * problems tree with every reference solution used to be there (issue 27, finding 7). */
    const char *ro[] = {job->runner_dir, job->paths.module_dir, p->dir, job->paths.include_dir};
    for (size_t i = 0; i < sizeof ro / sizeof *ro; i++)
        if (pk_path_exists(ro[i]))
            job->ro[job->n_ro++] = ro[i];
    snprintf(job->solutions_dir, sizeof job->solutions_dir, "%s/solutions", p->dir);
    job->hide[0] = job->solutions_dir;
    compute_key(job, source ? source : "");
    /* The job dir holds model-written code and its object: private (0700, files 0600), and
     * made fresh, never an existing directory someone else may have prepared. */
    int rc = pk_mkdir_private(root, NULL, err);
    if (rc == PK_OK)
        hold_owner_lock(root);
    if (rc == PK_OK && mkdir(job->dir, 0700) != 0)
        rc = pk_error_errno(err, PK_ERR_IO, "mkdir %s", job->dir);
    if (rc == PK_OK && job->opts.keep_workdir) { /* kept on purpose: never reaped */
        char keep[sizeof job->dir + 8];
        snprintf(keep, sizeof keep, "%s/.keep", job->dir);
        rc = pk_write_file_private(keep, "", 0, err);
    }
    if (rc == PK_OK && source)
        rc = pk_write_file_private(job->src_path, source, strlen(source), err);
    if (rc) {
        free(job);
        return rc;
    }
    /* Cheap format check before paying for nvcc: the entry point must be named. */
    if (job->opts.reference_as_candidate) {
        job->compiled = 1; /* calibration: the reference is timed against itself */
    } else if (!source || !strstr(source, p->entry)) {
        res->status = PK_STATUS_FORMAT_ERROR;
        snprintf(res->reason, sizeof res->reason, "the source does not define %s (expected: %s)",
                 p->entry, p->signature);
        job->failed = 1;
    }
    res->stages.prepare_ms = pk_now_ms() - t0;
    *out = job;
    return PK_OK;
}

const char *pk_job_compile_key(const pk_job *job) {
    return job->compile_key;
}

const char *pk_job_object_path(const pk_job *job) {
    return job->compiled ? job->so_path : NULL;
}

int pk_job_use_object(pk_job *job, const char *so_path, pk_eval_result *res, pk_error *err) {
    char *data = NULL;
    size_t len = 0;
    int rc = pk_read_file(so_path, &data, &len, err);
    if (rc == PK_OK)
        rc = pk_write_file_private(job->so_path, data, len, err);
    free(data);
    if (rc)
        return rc;
    pk_eval_result_add_check(res, "compile.flags", 1, "cached object; nvcc %s", job->flags);
    job->failed = 0; /* the cached object passed compile before; symbols are rechecked */
    return pk_job_check_symbols(job, res, err);
}

void pk_job_free(pk_job *job) {
    if (!job)
        return;
    pk_job_warm_abort(job);
    if (!job->opts.keep_workdir)
        pk_rm_rf(job->dir);
    free(job);
}

int pk_harness_evaluate(const pk_problem *p, const char *source, const pk_eval_opts *opts,
                        pk_eval_result *res, pk_error *err) {
    double t0 = pk_now_ms();
    pk_job *job = NULL;
    int rc = pk_job_create(p, source, opts, &job, res, err);
    int n = opts ? opts->n_gpus : 0;
    const int *gpus = opts ? opts->gpus : NULL;
    if (rc == PK_OK && !job->failed && !(opts && opts->no_warm)) {
        pk_error warm_err; /* no warm run only costs the overlap: run cold */
        pk_job_warm(job, gpus, n, &warm_err);
    }
    if (rc == PK_OK)
        rc = pk_job_compile(job, res, err);
    if (rc == PK_OK)
        rc = pk_job_run(job, gpus, n, res, err);
    pk_job_free(job);
    res->stages.total_ms = pk_now_ms() - t0;
    return rc;
}
