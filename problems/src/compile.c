/* The compile stage: nvcc into a shared object, inside the sandbox, with a timeout. */
#include "pk_harness_internal.h"
#include "pk_job.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Device problems: sm_90a shared object. Host problems (selftest) hold no device code, so nvcc
 * compiles them as host C++ (-x c++), which skips the device passes (0.7 s instead of 6 s). */
static const char *const gpu_flags[] = {"-shared",
                                        "-Xcompiler",
                                        "-fPIC",
                                        "-O3",
                                        "-std=c++17",
                                        "-gencode",
                                        "arch=compute_90a,code=sm_90a",
                                        "-lineinfo",
                                        "-cudart",
                                        "shared",
                                        NULL};
static const char *const host_flags[] = {"-x",
                                         "c++",
                                         "-shared",
                                         "-Xcompiler",
                                         "-fPIC",
                                         "-O3",
                                         "-std=c++17",
                                         "-cudart",
                                         "shared",
                                         "-DOMPI_SKIP_MPICXX=1",
                                         "-I" PK_MPI_INCLUDE,
                                         NULL};

static const char *const *flags_of(const pk_job *job) {
    return job->p->device_gpu ? gpu_flags : host_flags;
}

/* "device_api": true: pk_ctx.h includes nccl_device.h and declares ctx->dev_comm.
 * "libraries": ["cublas"]: the candidate may call cuBLAS and cuBLASLt; ["cufft"]: cuFFT.
 * Filled into the job's own list (at most 4 flags and the terminating NULL). */
static const char *const *extra_flags_of(const pk_job *job) {
    static __thread const char *out[5];
    int n = 0;
    if (job->p->device_gpu && job->p->device_api)
        out[n++] = "-DPK_DEVICE_API=1";
    if (job->p->link_cublas) {
        out[n++] = "-lcublas";
        out[n++] = "-lcublasLt";
    }
    if (job->p->link_cufft)
        out[n++] = "-lcufft";
    out[n] = NULL;
    return out;
}

/* The flags, as one string, recorded in the result and hashed into the compile key. */
void pk_job_compile_flags(const pk_job *job, char *out, size_t cap) {
    size_t used = 0;
    out[0] = 0;
    for (const char *const *f = flags_of(job); *f && used < cap; f++)
        used += (size_t)snprintf(out + used, cap - used, "%s ", *f);
    for (const char *const *f = extra_flags_of(job); *f && used < cap; f++)
        used += (size_t)snprintf(out + used, cap - used, "%s ", *f);
    if (used < cap)
        snprintf(out + used, cap - used, "-I%s", job->paths.include_dir);
}

int pk_job_compile(pk_job *job, pk_eval_result *res, pk_error *err) {
    if (job->failed || job->opts.reference_as_candidate)
        return PK_OK;
    char inc[600];
    snprintf(inc, sizeof inc, "-I%s", job->paths.include_dir);
    char *argv[32];
    int n = 0;
    argv[n++] = PK_NVCC;
    for (const char *const *f = flags_of(job); *f; f++)
        argv[n++] = (char *)*f;
    argv[n++] = inc;
    for (const char *const *f = extra_flags_of(job); *f; f++)
        argv[n++] = (char *)*f; /* libraries after the sources' position is fine for -shared */
    argv[n++] = job->src_path;
    argv[n++] = "-o";
    argv[n++] = job->so_path;
    argv[n] = NULL;
    const char *env[] = {"PATH=" PK_CUDA_BIN ":/usr/bin:/bin", "HOME=/tmp", "TMPDIR=/tmp", NULL};
    pk_sandbox_opts so = {0};
    so.wall_ms = pk_compile_timeout_ms(&job->opts);
    so.workdir = job->dir;
    so.env = env;
    so.ro = job->ro;
    so.n_ro = job->n_ro;
    so.hide = job->hide;
    so.n_hide = 1;
    so.output_cap = 64 * 1024;
    so.nice = pk_harness_compile_nice();
    pk_sandbox_result sr;
    double t0 = pk_now_ms();
    int rc = pk_harness_spawn(&so, argv, &sr, err);
    res->stages.compile_ms = pk_now_ms() - t0;
    if (rc)
        return rc;
    pk_strbuf log = {0};
    pk_strbuf_printf(&log, "$ nvcc %s\n", job->flags);
    pk_strbuf_append(&log, sr.out, sr.out_len);
    pk_strbuf_append(&log, sr.err, sr.err_len);
    free(res->compile_log);
    res->compile_log = pk_strbuf_take(&log);
    pk_eval_result_add_check(res, "compile.flags", 1, "nvcc %s", job->flags);
    if (sr.status == PK_SB_SETUP_ERROR) {
        rc = pk_error_set(err, PK_ERR_SYSTEM, "compile sandbox: %s", sr.detail);
    } else if (sr.status == PK_SB_TIMEOUT) {
        res->status = PK_STATUS_COMPILE_ERROR;
        snprintf(res->reason, sizeof res->reason, "compilation exceeded %d ms", so.wall_ms);
        job->failed = 1;
    } else if (sr.status != PK_SB_OK || !pk_path_exists(job->so_path)) {
        res->status = PK_STATUS_COMPILE_ERROR;
        const char *first = strstr(sr.err ? sr.err : "", "error");
        snprintf(res->reason, sizeof res->reason, "nvcc failed: %.400s",
                 first ? first : (sr.err_len ? sr.err : "no output"));
        char *nl = strchr(res->reason, '\n');
        if (nl)
            *nl = 0;
        job->failed = 1;
    }
    pk_harness_spawn_free(&sr);
    if (rc || job->failed)
        return rc;
    /* The object is model-written code: for the server's user only, like the rest of the job
     * (the linker made it executable; dlopen needs no x bit). Never through a symlink. */
    int fd = open(job->so_path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || fchmod(fd, 0600) != 0) {
        if (fd >= 0)
            close(fd);
        res->status = PK_STATUS_COMPILE_ERROR;
        snprintf(res->reason, sizeof res->reason, "the compiler left no regular file as output");
        job->failed = 1;
        return PK_OK;
    }
    close(fd);
    return pk_job_check_symbols(job, res, err);
}

int pk_job_check_symbols(pk_job *job, pk_eval_result *res, pk_error *err) {
    double t0 = pk_now_ms();
    int rc = pk_elf_check(job->so_path, job->p, res, err);
    if (rc == PK_OK)
        rc = pk_elf_scan_syscalls(job->so_path, res, err);
    res->stages.symbols_ms = pk_now_ms() - t0;
    if (rc)
        return rc;
    if (res->status == PK_STATUS_REJECTED || res->status == PK_STATUS_FORMAT_ERROR)
        job->failed = 1;
    else
        job->compiled = 1;
    return PK_OK;
}
