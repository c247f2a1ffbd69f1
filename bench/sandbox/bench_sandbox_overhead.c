/* The sandbox's own overhead: wall time of pk_sandbox_run on /bin/true, against a plain
 * fork + exec + wait of the same binary. Prints p50, p99 and the mean of each.
 * usage: bench_sandbox_overhead [RUNS] [MAX_P50_MS]
 * With MAX_P50_MS, exits 1 when the sandbox's p50 exceeds it (nvcc alone takes about 2 s). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pk_sandbox.h"

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void report(const char *what, double *ms, int n) {
    qsort(ms, (size_t)n, sizeof *ms, cmp);
    double sum = 0;
    for (int i = 0; i < n; i++)
        sum += ms[i];
    int p99 = (int)(0.99 * (n - 1) + 0.5);
    printf("%-22s runs=%d p50=%.2f ms p99=%.2f ms mean=%.2f ms max=%.2f ms\n", what, n, ms[n / 2],
           ms[p99], sum / n, ms[n - 1]);
}

int main(int argc, char **argv) {
    int runs = argc > 1 ? atoi(argv[1]) : 200;
    double max_p50 = argc > 2 ? atof(argv[2]) : 0;
    if (runs < 2) {
        fprintf(stderr, "usage: %s [RUNS>=2] [MAX_P50_MS]\n", argv[0]);
        return 2;
    }
    double *sb = calloc((size_t)runs, sizeof *sb), *plain = calloc((size_t)runs, sizeof *plain);
    if (!sb || !plain)
        return 2;
    char *true_argv[] = {"/bin/true", NULL};
    for (int i = 0; i < runs; i++) {
        double t0 = pk_now_ms();
        pid_t p = fork();
        if (p == 0) {
            execv(true_argv[0], true_argv);
            _exit(127);
        }
        waitpid(p, NULL, 0);
        plain[i] = pk_now_ms() - t0;
    }
    for (int i = 0; i < runs; i++) {
        pk_sandbox_opts o;
        memset(&o, 0, sizeof o);
        pk_sandbox_result r;
        pk_error err = {0};
        double t0 = pk_now_ms();
        if (pk_sandbox_run(&o, true_argv, &r, &err)) {
            fprintf(stderr, "pk_sandbox_run: %s\n", err.message);
            return 2;
        }
        sb[i] = pk_now_ms() - t0;
        if (r.status != PK_SB_OK) {
            fprintf(stderr, "run %d: %s %s\n", i, pk_sb_status_name(r.status), r.detail);
            return 2;
        }
        pk_sandbox_result_free(&r);
    }
    report("fork+exec /bin/true", plain, runs);
    report("sandbox /bin/true", sb, runs);
    double p50 = sb[runs / 2];
    free(sb);
    free(plain);
    if (max_p50 > 0 && p50 > max_p50) {
        printf("FAIL: sandbox p50 %.2f ms above %.2f ms\n", p50, max_p50);
        return 1;
    }
    return 0;
}
