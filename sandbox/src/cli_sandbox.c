/* `pkgym sandbox`: runs one command in the sandbox and prints the JSON verdict. */
#include "pk_sandbox.h"

#include "pk_cli_args.h"
#include "pk_opts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SB_CLI_MAX_LIST 64

/* The command's lists, filled by the option table. */
typedef struct sb_cli {
    pk_sandbox_opts o;
    int gpus[SB_CLI_MAX_LIST];
    const char *ro[SB_CLI_MAX_LIST], *rw[SB_CLI_MAX_LIST], *env_add[SB_CLI_MAX_LIST + 1];
    int n_env;
    long output_cap;
} sb_cli;

static int parse_env(const char *cmd, const char *name, const char *v, void *dest) {
    sb_cli *c = dest;
    if (!strchr(v, '=') || v[0] == '=' || c->n_env >= SB_CLI_MAX_LIST) {
        fprintf(stderr, "pkgym %s: %s wants NAME=VALUE (at most %d), got '%s'\n", cmd, name,
                SB_CLI_MAX_LIST, v);
        return -1;
    }
    c->env_add[c->n_env++] = v;
    return 0;
}

#define N_OPTS 13

static void options(sb_cli *c, pk_opt t[N_OPTS]) {
    const pk_opt rows[N_OPTS] = {
        {PK_OPT_INT, "--wall-ms", "N", "wall-clock limit (default 60000)", &c->o.wall_ms, 1,
         86400000L, NULL, 0, NULL, NULL},
        {PK_OPT_INT, "--cpu-ms", "N", "CPU time limit over the whole tree (default: none)",
         &c->o.cpu_ms, 1, 86400000L, NULL, 0, NULL, NULL},
        {PK_OPT_LONG, "--mem-mb", "N", "memory limit, by cgroup where the host allows it",
         &c->o.mem_mb, 1, 1L << 30, NULL, 0, NULL, NULL},
        {PK_OPT_INT, "--pids", "N", "processes at most (default 256)", &c->o.pids, 1, 1 << 20, NULL,
         0, NULL, NULL},
        {PK_OPT_LONG, "--fsize-mb", "N", "largest file written (default 256)", &c->o.fsize_mb, 1,
         1L << 30, NULL, 0, NULL, NULL},
        {PK_OPT_INT, "--nofile", "N", "open files at most (default 1024)", &c->o.nofile, 16,
         1 << 20, NULL, 0, NULL, NULL},
        {PK_OPT_LONG, "--output-cap", "BYTES", "bytes kept of stdout and of stderr (default 1 MiB)",
         &c->output_cap, 1, 1L << 30, NULL, 0, NULL, NULL},
        {PK_OPT_INT_LIST, "--gpus", "LIST",
         "GPU indices in PCI bus order (nvidia-smi's), comma-separated; each\n"
         "GPU's node /dev/nvidiaM is found through the driver (M: its minor)\n"
         "and CUDA_VISIBLE_DEVICES names exactly those GPUs inside",
         c->gpus, 0, 255, &c->o.n_gpus, SB_CLI_MAX_LIST, NULL, NULL},
        {PK_OPT_SECTION, NULL, NULL, "Files and environment:", NULL, 0, 0, NULL, 0, NULL, NULL},
        {PK_OPT_STR_LIST, "--ro", "PATH",
         "a read-only bind; repeatable (PKGYM_SANDBOX_RO adds\n"
         "more, colon-separated)",
         c->ro, 0, 0, &c->o.n_ro, SB_CLI_MAX_LIST, NULL, NULL},
        {PK_OPT_STR_LIST, "--rw", "PATH", "a writable bind; repeatable", c->rw, 0, 0, &c->o.n_rw,
         SB_CLI_MAX_LIST, NULL, NULL},
        {PK_OPT_STR, "--workdir", "DIR", "a private writable work dir, also the cwd", &c->o.workdir,
         0, 0, NULL, 0, NULL, NULL},
        {PK_OPT_CUSTOM, "--env", "NAME=VALUE",
         "added to the default environment; repeatable (NCCL_NVLS_ENABLE=0\nalways)", c, 0, 0, NULL,
         SB_CLI_MAX_LIST, parse_env, NULL},
    };
    memcpy(t, rows, sizeof rows);
}

static void usage(FILE *f, const pk_opt *t) {
    pk_opts_synopsis(f, "usage: pkgym sandbox", t, N_OPTS, "-- CMD ARGS...");
    fprintf(f,
            "\nRuns CMD (an absolute path, or relative to the work dir) in new user, mount, PID,\n"
            "network, IPC and UTS namespaces with a minimal read-only filesystem, rlimits,\n"
            "cgroups where the host allows and a seccomp filter, then prints one JSON verdict:\n"
            "status (ok, exit, signal, timeout, memory, output_limit, setup_error), exit_code,\n"
            "signal, wall_ms, cpu_ms, max_rss_kb, stdout, stderr, truncated, detail, limits.\n"
            "Exit status: 0 when a verdict was printed.\n\n"
            "Limits:\n");
    pk_opts_help(f, t, N_OPTS);
}

int pk_cmd_sandbox(int argc, char **argv) {
    static sb_cli c; /* the lists are large for a stack frame of a CLI; one call per process */
    memset(&c, 0, sizeof c);
    pk_opt t[N_OPTS];
    options(&c, t);
    int i = argc;
    int pa = pk_opts_parse("sandbox", t, N_OPTS, argc, argv, 1, 0, &i);
    if (pa == PK_OPTS_HELP) {
        usage(stdout, t);
        return 0;
    }
    if (pa == PK_OPTS_OK && i >= argc)
        fprintf(stderr, "pkgym sandbox: no command given after --\n");
    if (pa != PK_OPTS_OK || i >= argc) {
        fprintf(stderr, "usage: pkgym sandbox [options] -- CMD ARGS...  (--help: the options)\n");
        return 2;
    }
    pk_sandbox_opts o = c.o;
    o.output_cap = (size_t)c.output_cap;
    o.gpus = c.gpus;
    o.ro = c.ro;
    o.rw = c.rw;
    c.env_add[c.n_env] = NULL;
    o.env_add = c.env_add;
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
