/* The run stage: every rank of the job in one sandbox, through pk-runner. */
#define _GNU_SOURCE
#include "pk_job.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int pk_job_run(pk_job *job, const int *gpus, int n_gpus, pk_eval_result *res, pk_error *err) {
    if (job->failed)
        return PK_OK;
    if (!job->compiled)
        return pk_error_set(err, PK_ERR_INVALID, "pk_job_run: nothing compiled");
    const pk_problem *p = job->p;
    if (n_gpus && n_gpus != job->world)
        return pk_error_set(err, PK_ERR_INVALID, "%s: %d GPUs given for world size %d", p->id,
                            n_gpus, job->world);
    const char *launcher = job->opts.launcher ? job->opts.launcher : p->launcher;
    if (strcmp(launcher, "fork") != 0 && strcmp(launcher, "mpi") != 0)
        return pk_error_set(err, PK_ERR_INVALID, "unknown launcher %s", launcher);
    if (!p->device_gpu && strcmp(launcher, "mpi") != 0)
        return pk_error_set(err, PK_ERR_INVALID, "%s: host problems need the mpi launcher", p->id);
    snprintf(res->launcher, sizeof res->launcher, "%s", launcher);

    char world[8], trials[8], seed[24], module_arg[600];
    snprintf(world, sizeof world, "%d", job->world);
    snprintf(trials, sizeof trials, "%d", job->trials);
    snprintf(seed, sizeof seed, "%llu", (unsigned long long)job->seed);
    snprintf(module_arg, sizeof module_arg, "%s", p->module_path ? p->module_path : "");
    char *argv[48];
    int n = 0;
    if (!strcmp(launcher, "mpi")) {
        const char *mpi[] = {PK_MPIRUN, "-np", world, "--oversubscribe", "--bind-to", "none"};
        for (size_t i = 0; i < sizeof mpi / sizeof *mpi; i++)
            argv[n++] = (char *)mpi[i];
    }
    const char *args[] = {job->paths.runner,
                          "--problem-dir",
                          p->dir,
                          "--suite",
                          p->suite,
                          "--name",
                          p->name,
                          "--module",
                          module_arg,
                          "--seed",
                          seed,
                          "--trials",
                          trials,
                          "--world",
                          world,
                          "--launcher",
                          launcher,
                          "--out",
                          job->result_path,
                          "--progress-dir",
                          job->dir};
    for (size_t i = 0; i < sizeof args / sizeof *args; i++)
        argv[n++] = (char *)args[i];
    if (job->opts.reference_as_candidate) {
        argv[n++] = "--reference-as-candidate";
    } else {
        argv[n++] = "--candidate";
        argv[n++] = job->so_path;
    }
    if (job->opts.skip_timing)
        argv[n++] = "--skip-timing";
    if (job->opts.baseline_us > 0)
        argv[n++] = "--skip-reference-timing";
    argv[n] = NULL;

    /* The sandbox's default environment (PATH, HOME, CUDA_VISIBLE_DEVICES for the bound GPUs,
     * NCCL_SOCKET_IFNAME=lo, NCCL_NVLS_ENABLE=0, Open MPI as root without CMA) plus ours. */
    const char *env_add[] = {"NCCL_NVLS_ENABLE=0", "NCCL_SOCKET_IFNAME=lo",
                             "OMPI_MCA_btl=self,vader",
                             /* mpirun needs an rsh agent to exist even for local ranks */
                             "OMPI_MCA_plm_rsh_agent=false", "ASAN_OPTIONS=detect_leaks=0",
                             /* host jobs see no /sys: hwloc would warn on every rank */
                             "HWLOC_HIDE_ERRORS=2", NULL, NULL, NULL};
    /* Diagnostics for GPU jobs, passed through from the harness's environment. */
    char nccl_debug[64];
    size_t n_env = sizeof env_add / sizeof *env_add - 3;
    const char *dbg = getenv("PKGYM_NCCL_DEBUG");
    if (dbg && *dbg) {
        snprintf(nccl_debug, sizeof nccl_debug, "NCCL_DEBUG=%s", dbg);
        env_add[n_env++] = nccl_debug;
    }
    pk_sandbox_opts so = {0};
    so.wall_ms = job->opts.run_timeout_ms ? job->opts.run_timeout_ms : 60000;
    so.workdir = job->dir;
    so.env_add = env_add;
    so.ro = job->ro;
    so.n_ro = job->n_ro;
    so.output_cap = 16 * 1024;
    so.n_gpus = 0;
    int default_gpus[PK_MAX_RANKS];
    if (p->device_gpu) {
        for (int i = 0; i < job->world; i++)
            default_gpus[i] = n_gpus ? gpus[i] : i;
        so.gpus = default_gpus;
        so.n_gpus = job->world;
    }
    pk_sandbox_result sr;
    int rc = pk_harness_spawn(&so, argv, &sr, err);
    res->stages.run_ms = sr.wall_ms;
    if (rc == PK_OK)
        rc = pk_job_classify_run(job, &sr, res, err);
    pk_harness_spawn_free(&sr);
    return rc;
}
