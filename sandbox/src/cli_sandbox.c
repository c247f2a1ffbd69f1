/* `pkgym sandbox`: runs one command in the sandbox and prints the JSON verdict. */
#include "pk_sandbox.h"

#include "pk_cli_args.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SB_CLI_MAX_LIST 64

static void usage(FILE *f) {
    fprintf(f, "usage: pkgym sandbox [--wall-ms N] [--cpu-ms N] [--mem-mb N] [--pids N]\n"
               "                     [--fsize-mb N] [--nofile N] [--output-cap BYTES]\n"
               "                     [--gpus LIST] [--ro PATH]... [--rw PATH]... [--workdir DIR]\n"
               "                     [--env NAME=VALUE]...\n"
               "                     -- CMD ARGS...\n\n"
               "Runs CMD (an absolute path, or relative to the work dir) in new user, mount, PID,\n"
               "network, IPC and UTS namespaces with a minimal read-only filesystem, rlimits,\n"
               "cgroups where the host allows and a seccomp filter, then prints one JSON verdict:\n"
               "status (ok, exit, signal, timeout, memory, output_limit, setup_error), exit_code,\n"
               "signal, wall_ms, cpu_ms, max_rss_kb, stdout, stderr, truncated, detail, limits.\n"
               "LIST is comma-separated GPU indices in PCI bus order (nvidia-smi's); each GPU's\n"
               "node /dev/nvidiaM is found through the driver (M: its minor) and\n"
               "CUDA_VISIBLE_DEVICES names exactly those GPUs inside. PKGYM_SANDBOX_RO adds\n"
               "read-only paths (colon-separated). --env adds to the default environment\n"
               "(NCCL_NVLS_ENABLE=0 always). Exit status: 0 when a verdict was printed.\n");
}

static int parse_long(const char *flag, const char *s, long lo, long hi, long *out) {
    return pk_arg_long("sandbox", flag, s, lo, hi, out);
}

static int parse_gpus(const char *s, int *gpus, int *n) {
    char *copy = s ? strdup(s) : NULL, *save = NULL;
    if (!copy)
        return -1;
    int rc = 0;
    for (char *t = strtok_r(copy, ",", &save); t && !rc; t = strtok_r(NULL, ",", &save)) {
        long v;
        if (*n >= SB_CLI_MAX_LIST || parse_long("--gpus", t, 0, 255, &v))
            rc = -1;
        else
            gpus[(*n)++] = (int)v;
    }
    free(copy);
    return rc;
}

int pk_cmd_sandbox(int argc, char **argv) {
    pk_sandbox_opts o;
    memset(&o, 0, sizeof o);
    int gpus[SB_CLI_MAX_LIST];
    const char *ro[SB_CLI_MAX_LIST], *rw[SB_CLI_MAX_LIST], *env_add[SB_CLI_MAX_LIST + 1];
    int n_env = 0;
    int i = 1;
    while (i < argc) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        long n = 0;
        int rc = 0;
        if (strcmp(a, "--") == 0) {
            i++;
            break;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--wall-ms") == 0) {
            rc = parse_long(a, v, 1, 86400000L, &n);
            o.wall_ms = (int)n;
        } else if (strcmp(a, "--cpu-ms") == 0) {
            rc = parse_long(a, v, 1, 86400000L, &n);
            o.cpu_ms = (int)n;
        } else if (strcmp(a, "--mem-mb") == 0) {
            rc = parse_long(a, v, 1, 1L << 30, &n);
            o.mem_mb = n;
        } else if (strcmp(a, "--pids") == 0) {
            rc = parse_long(a, v, 1, 1 << 20, &n);
            o.pids = (int)n;
        } else if (strcmp(a, "--fsize-mb") == 0) {
            rc = parse_long(a, v, 1, 1L << 30, &n);
            o.fsize_mb = n;
        } else if (strcmp(a, "--nofile") == 0) {
            rc = parse_long(a, v, 16, 1 << 20, &n);
            o.nofile = (int)n;
        } else if (strcmp(a, "--output-cap") == 0) {
            rc = parse_long(a, v, 1, 1L << 30, &n);
            o.output_cap = (size_t)n;
        } else if (strcmp(a, "--gpus") == 0) {
            rc = parse_gpus(v, gpus, &o.n_gpus);
            o.gpus = gpus;
        } else if (strcmp(a, "--ro") == 0 || strcmp(a, "--rw") == 0) {
            int is_ro = a[3] == 'o';
            int *count = is_ro ? &o.n_ro : &o.n_rw;
            if (!v || *count >= SB_CLI_MAX_LIST) {
                fprintf(stderr, "pkgym sandbox: %s needs a path (at most %d)\n", a,
                        SB_CLI_MAX_LIST);
                rc = -1;
            } else {
                (is_ro ? ro : rw)[(*count)++] = v;
            }
        } else if (strcmp(a, "--env") == 0) {
            rc = v && strchr(v, '=') && n_env < SB_CLI_MAX_LIST ? 0 : -1;
            if (rc)
                fprintf(stderr, "pkgym sandbox: --env needs NAME=VALUE (at most %d)\n",
                        SB_CLI_MAX_LIST);
            else
                env_add[n_env++] = v;
        } else if (strcmp(a, "--workdir") == 0) {
            o.workdir = v;
            rc = v ? 0 : -1;
        } else {
            fprintf(stderr, "pkgym sandbox: unknown option '%s'\n", a);
            rc = -1;
        }
        if (rc) {
            usage(stderr);
            return 2;
        }
        i += 2; /* every option takes a value */
    }
    if (i >= argc) {
        fprintf(stderr, "pkgym sandbox: no command given after --\n");
        usage(stderr);
        return 2;
    }
    o.ro = ro;
    o.rw = rw;
    env_add[n_env] = NULL;
    o.env_add = env_add;
    pk_sandbox_result res;
    pk_error err = {0};
    if (pk_sandbox_run(&o, argv + i, &res, &err)) {
        fprintf(stderr, "pkgym sandbox: %s\n", err.message);
        return 2;
    }
    char *json = pk_sandbox_result_to_json(&res);
    pk_sandbox_result_free(&res);
    if (!json) {
        fprintf(stderr, "pkgym sandbox: out of memory\n");
        return 2;
    }
    puts(json);
    free(json);
    return 0;
}
