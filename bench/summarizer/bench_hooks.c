/* What running hooks in the sandbox costs per call. For each hook: the feedback hook called
 * through the summarizer (sandboxed, as the server does it), and the same helper process run
 * the way hooks ran before issue #19 (fork + exec + request on stdin + answer on stdout, no
 * sandbox). The difference is the added latency per hook call; a step calls at most three
 * hooks (summarize, feedback, history). The built-in feedback is the floor.
 *
 * usage: bench_hooks RUNS PLUGIN.so CMD [MAX_ADDED_P50_MS]
 * Prints one line per mode: p50, p99, mean, max. With MAX_ADDED_P50_MS, exits 1 when the
 * sandbox adds more than that at the median to the plugin hook. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pk_harness.h"
#include "pk_summarizer.h"

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double report(const char *what, double *ms, int n) {
    qsort(ms, (size_t)n, sizeof *ms, cmp);
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += ms[i];
    int p99 = (int)(0.99 * (n - 1) + 0.5);
    printf("%-34s runs=%d p50=%.2f ms p99=%.2f ms mean=%.2f ms max=%.2f ms\n", what, n, ms[n / 2],
           ms[p99], sum / n, ms[n - 1]);
    return ms[n / 2];
}

/* A compile error with a short log: a typical feedback request. */
static void sample(pk_eval_result *r) {
    pk_eval_result_init(r);
    r->status = PK_STATUS_COMPILE_ERROR;
    r->world_size = 2;
    snprintf(r->reason, sizeof r->reason, "nvcc failed");
    r->compile_log = strdup("candidate.cu(14): error: identifier \"tile\" is undefined\n"
                            "      y[i] = tile[i];\n             ^\n\n"
                            "1 error detected in the compilation of \"candidate.cu\".\n");
}

/* The pre-#19 way: fork, exec, request on stdin, answer on stdout, wait. */
static double plain_call(char *const argv[], const char *request) {
    int in[2], out[2];
    if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC))
        return -1;
    double t0 = pk_now_ms();
    pid_t pid = fork();
    if (pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 2);
        execv(argv[0], argv);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    ssize_t w = write(in[1], request, strlen(request));
    (void)w;
    close(in[1]);
    char buf[65536];
    while (read(out[0], buf, sizeof buf) > 0) {
    }
    close(out[0]);
    waitpid(pid, NULL, 0);
    return pk_now_ms() - t0;
}

static int time_summarizer(const char *options, const pk_hook_registry *reg, int runs, double *ms) {
    pk_summarizer *s = NULL;
    pk_error err = {0};
    if (pk_summarizer_create_with_hooks(options, reg, NULL, &s, &err)) {
        fprintf(stderr, "summarizer: %s\n", err.message);
        return -1;
    }
    pk_eval_result r;
    sample(&r);
    for (int i = 0; i < runs; i++) {
        double t0 = pk_now_ms();
        free(pk_summarizer_feedback(s, &r, NULL));
        ms[i] = pk_now_ms() - t0;
    }
    int failed = pk_summarizer_hook_fallbacks(s);
    if (failed)
        fprintf(stderr, "hook failed %d times: %s\n", failed, pk_summarizer_last_hook_error(s));
    pk_eval_result_free(&r);
    pk_summarizer_free(s);
    return failed ? -1 : 0;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s RUNS PLUGIN.so CMD [MAX_ADDED_P50_MS]\n", argv[0]);
        return 2;
    }
    int runs = atoi(argv[1]);
    const char *plugin = argv[2], *cmd = argv[3];
    double max_added = argc > 4 ? atof(argv[4]) : 0;
    if (runs < 2)
        return 2;
    double *ms = calloc((size_t)runs, sizeof *ms);
    pk_hook_registry *reg = pk_hook_registry_new();
    char spec[4200];
    pk_error err = {0};
    snprintf(spec, sizeof spec, "plugin:%s", plugin);
    if (!ms || !reg || pk_hook_registry_add(reg, "plugin", spec, &err)) {
        fprintf(stderr, "%s\n", err.message);
        return 2;
    }
    snprintf(spec, sizeof spec, "cmd:%s", cmd);
    if (pk_hook_registry_add(reg, "cmd", spec, &err)) {
        fprintf(stderr, "%s\n", err.message);
        return 2;
    }
    /* A request as the feedback hook gets it (its exact text does not matter for the cost). */
    const char *request = "{\"hook\":\"feedback\",\"abi_version\":1,\"problem_id\":null,"
                          "\"builtin\":\"Compilation failed.\",\"entry\":null,\"result\":{"
                          "\"status\":\"compile_error\",\"reason\":\"nvcc failed\","
                          "\"compile_log\":\"candidate.cu(14): error\"}}";
    char *host = getenv("PKGYM_SUMMARIZER_HOOK_HOST");
    char *plugin_argv[] = {host ? host : PK_SUMMARIZER_HOOK_HOST, (char *)plugin, "feedback", NULL};
    char *cmd_argv[] = {(char *)cmd, "feedback", NULL};

    if (time_summarizer("{}", reg, runs, ms))
        return 1;
    report("builtin feedback", ms, runs);
    for (int i = 0; i < runs; i++)
        ms[i] = plain_call(plugin_argv, request);
    double plain_plugin = report("plugin, fork+exec (before #19)", ms, runs);
    if (time_summarizer("{\"hooks\": {\"feedback\": \"plugin\"}}", reg, runs, ms))
        return 1;
    double sandboxed_plugin = report("plugin, in pk_sandbox", ms, runs);
    for (int i = 0; i < runs; i++)
        ms[i] = plain_call(cmd_argv, request);
    double plain_cmd = report("command, fork+exec (before #19)", ms, runs);
    if (time_summarizer("{\"hooks\": {\"feedback\": \"cmd\"}}", reg, runs, ms))
        return 1;
    double sandboxed_cmd = report("command, in pk_sandbox", ms, runs);
    printf("added by the sandbox at p50: plugin %+.2f ms, command %+.2f ms per hook call\n",
           sandboxed_plugin - plain_plugin, sandboxed_cmd - plain_cmd);
    free(ms);
    pk_hook_registry_free(reg);
    if (max_added > 0 && sandboxed_plugin - plain_plugin > max_added) {
        fprintf(stderr, "the sandbox adds %.2f ms at p50, over %.2f\n",
                sandboxed_plugin - plain_plugin, max_added);
        return 1;
    }
    return 0;
}
