/* pkgym: the single CLI. Each subcommand lives in the module that owns it. */
#include <stdio.h>
#include <string.h>

#include "pk_archive.h"
#include "pk_common.h"
#include "pk_env.h"
#include "pk_problems.h"
#include "pk_reward.h"
#include "pk_rollout.h"
#include "pk_sandbox.h"
#include "pk_worker.h"

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"serve", pk_cmd_serve, "run the environment server (ZeroMQ + msgpack, protocol v1)"},
    {"worker", pk_cmd_worker, "run evaluation jobs for a serve --worker-bind broker (scale-out)"},
    {"check", pk_cmd_check, "evaluate one submission locally and print feedback and result"},
    {"sandbox", pk_cmd_sandbox, "run a command in the sandbox and print a JSON verdict"},
    {"eval", pk_cmd_eval, "scripted multi-turn evaluation against a server"},
    {"reward", pk_cmd_reward, "recompute rewards, returns and advantages from a trajectory store"},
    {"export", pk_cmd_export, "export trajectories or verified kernels as JSONL"},
    {"archive", pk_cmd_archive,
     "list, show, export, import or seed the archive of verified kernels"},
    {"problems", pk_cmd_problems, "list and inspect the problem suite"},
    {"keygen", pk_cmd_keygen, "make a CURVE key pair for the server or a client"},
};
#define N_COMMANDS (sizeof commands / sizeof *commands)

static void usage(FILE *f) {
    fprintf(f,
            "pkgym %s: an RL environment for multi-GPU CUDA kernels\n\n"
            "usage: pkgym <command> [options]\n       pkgym --version | help [command]\n\n"
            "commands:\n",
            PK_VERSION);
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nRun 'pkgym <command> --help' for a command's options.\n");
}

static const command *find(const char *name) {
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *name = argv[1];
    if (strcmp(name, "--version") == 0 || strcmp(name, "version") == 0) {
        pk_print_version(stdout);
        return 0;
    }
    if (strcmp(name, "help") == 0 || strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) {
        if (argc > 2) {
            const command *c = find(argv[2]);
            if (!c) {
                fprintf(stderr, "pkgym: unknown command '%s'\n", argv[2]);
                return 2;
            }
            char *help_argv[] = {argv[2], "--help", NULL};
            return c->run(2, help_argv);
        }
        usage(stdout);
        return 0;
    }
    const command *c = find(name);
    if (!c) {
        fprintf(stderr, "pkgym: unknown command '%s'. Run 'pkgym help'.\n", name);
        return 2;
    }
    return c->run(argc - 1, argv + 1);
}
