/* What the broker adds per job, and how many jobs per second it passes: no-op jobs (answered
 * by the worker at once, never scored) through pk_broker and `pkgym worker` processes over
 * loopback TCP, so all of the time measured is the broker's path: submit, placement, the
 * wire both ways, the worker's event loop, the completion.
 *
 *   bench_broker --pkgym PATH [--workers N] [--jobs J] [--inflight K] [--serial S] [--curve]
 *
 * --curve: the worker endpoint uses CURVE (keys made here, the workers' key allowed for the
 * broker's ZAP domain), as `pkgym serve --worker-curve-allow` does.
 * Phase 1: S jobs one at a time (latency = the broker's cost per job when idle).
 * Phase 2: J jobs with K in flight (throughput, and latency under load). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <zmq.h>

#include "pk_broker.h"
#include "pk_curve.h"

#define MAX_WORKERS 64

typedef struct opts {
    const char *pkgym;
    int workers, jobs, inflight, serial, curve;
} opts;

/* CPU time of this process (the broker's thread, and the main thread submitting and taking
 * completions), in microseconds. */
static double cpu_us(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 + ru.ru_utime.tv_usec +
           ru.ru_stime.tv_usec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(double *v, int n, double p) {
    if (n == 0)
        return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    int i = (int)(p * (n - 1) + 0.5);
    return v[i];
}

static int free_port(void) {
    /* The kernel picks one for a throwaway ZeroMQ socket; it is free again after close. */
    void *ctx = zmq_ctx_new(), *s = zmq_socket(ctx, ZMQ_ROUTER);
    char ep[64];
    size_t len = sizeof ep;
    int port = 0;
    if (zmq_bind(s, "tcp://127.0.0.1:*") == 0 &&
        zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, ep, &len) == 0)
        port = atoi(strrchr(ep, ':') + 1);
    zmq_close(s);
    zmq_ctx_term(ctx);
    return port;
}

static pid_t spawn_worker(const char *pkgym, const char *ep, const char *dir, int k, int curve) {
    char name[32], server_pub[4200], worker_key[4200];
    snprintf(name, sizeof name, "bench%d", k);
    snprintf(server_pub, sizeof server_pub, "%s/server.pub", dir);
    snprintf(worker_key, sizeof worker_key, "%s/worker.key", dir);
    pid_t pid = fork();
    if (pid == 0) {
        if (curve)
            execl(pkgym, pkgym, "worker", "--connect", ep, "--gpus", "none", "--compile-workers",
                  "1", "--max-jobs", "100000", "--data-dir", dir, "--name", name, "--quiet",
                  "--curve-server-key", server_pub, "--curve-secret-key", worker_key, (char *)NULL);
        else
            execl(pkgym, pkgym, "worker", "--connect", ep, "--gpus", "none", "--compile-workers",
                  "1", "--max-jobs", "100000", "--data-dir", dir, "--name", name, "--quiet",
                  (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* The server's and the workers' key pairs in dir, the workers' public key in dir/allow, and
 * the ZAP handler admitting it on the broker's domain. */
static int start_curve(void *ctx, const char *dir, pk_curve_server **cs, pk_error *err) {
    pk_curve_keypair server, worker;
    char base[4200], allow[4200], pub[4300];
    snprintf(allow, sizeof allow, "%s/allow", dir);
    snprintf(pub, sizeof pub, "%s/worker.pub", allow);
    int rc = pk_curve_keypair_new(&server, err);
    if (!rc)
        rc = pk_curve_keypair_new(&worker, err);
    snprintf(base, sizeof base, "%s/server", dir);
    if (!rc)
        rc = pk_curve_keypair_save(&server, base, 0, err);
    snprintf(base, sizeof base, "%s/worker", dir);
    if (!rc)
        rc = pk_curve_keypair_save(&worker, base, 0, err);
    if (!rc)
        rc = pk_mkdir_p(allow, err);
    if (!rc)
        rc = pk_write_file(pub, worker.public_key, PK_CURVE_KEY_LEN, err);
    snprintf(base, sizeof base, "%s/server.key", dir);
    if (!rc)
        rc = pk_curve_server_start(ctx, base, cs, err);
    if (!rc)
        rc = pk_curve_server_allow(*cs, PK_BROKER_ZAP_DOMAIN, allow, err);
    return rc;
}

/* Waits for one completion; returns its latency in ms (or -1 on timeout). */
static double take(void *pull, const double *t_submit, int n_slots, int *bad) {
    zmq_pollitem_t it = {pull, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&it, 1, 30000) <= 0)
        return -1;
    pk_completion *c = NULL;
    if (zmq_recv(pull, &c, sizeof c, 0) != (int)sizeof c || !c)
        return -1;
    double now = pk_now_ms();
    int slot = (int)(uintptr_t)c->user;
    /* A no-op never carries a verdict. */
    if (c->harness_rc != PK_ERR_UNSUPPORTED)
        (*bad)++;
    double lat = slot >= 0 && slot < n_slots ? now - t_submit[slot] : -1;
    pk_completion_free(c);
    return lat;
}

static int parse(int argc, char **argv, opts *o) {
    *o = (opts){NULL, 2, 20000, 256, 2000, 0};
    for (int i = 1; i < argc; i += 2) {
        if (strcmp(argv[i], "--curve") == 0) {
            o->curve = 1;
            i--;
            continue;
        }
        if (i + 1 >= argc)
            return -1;
        if (strcmp(argv[i], "--pkgym") == 0)
            o->pkgym = argv[i + 1];
        else if (strcmp(argv[i], "--workers") == 0)
            o->workers = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--jobs") == 0)
            o->jobs = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--inflight") == 0)
            o->inflight = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--serial") == 0)
            o->serial = atoi(argv[i + 1]);
        else
            return -1;
    }
    return o->pkgym && o->workers > 0 && o->workers <= MAX_WORKERS && o->jobs > 0 &&
                   o->inflight > 0 && o->serial > 0
               ? 0
               : -1;
}

int main(int argc, char **argv) {
    opts o;
    if (parse(argc, argv, &o)) {
        fprintf(stderr, "usage: bench_broker --pkgym PATH [--workers N] [--jobs J] "
                        "[--inflight K] [--serial S] [--curve]\n");
        return 2;
    }
    char dir[] = "/tmp/pk-bench-broker-XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    void *ctx = zmq_ctx_new();
    void *pull = zmq_socket(ctx, ZMQ_PULL);
    int zero = 0;
    zmq_setsockopt(pull, ZMQ_RCVHWM, &zero, sizeof zero);
    zmq_bind(pull, "inproc://bench-done");
    char ep[64];
    snprintf(ep, sizeof ep, "tcp://127.0.0.1:%d", free_port());
    pk_broker_opts bo;
    memset(&bo, 0, sizeof bo);
    bo.zmq_ctx = ctx;
    bo.done_endpoint = "inproc://bench-done";
    bo.binds[0] = ep;
    bo.n_binds = 1;
    bo.queue_limit = o.inflight + 16;
    pk_broker *b = NULL;
    pk_curve_server *cs = NULL;
    pk_error err;
    if (o.curve && start_curve(ctx, dir, &cs, &err)) {
        fprintf(stderr, "bench_broker: CURVE: %s\n", err.message);
        return 1;
    }
    bo.curve = cs;
    if (pk_broker_create(&bo, &b, &err)) {
        fprintf(stderr, "bench_broker: %s\n", err.message);
        return 1;
    }
    pid_t pids[MAX_WORKERS];
    for (int k = 0; k < o.workers; k++)
        pids[k] = spawn_worker(o.pkgym, ep, dir, k, o.curve);
    pk_broker_stats st;
    for (int i = 0; i < 300; i++) {
        pk_broker_get_stats(b, &st);
        if (st.workers == o.workers)
            break;
        usleep(100000);
    }
    int rc = 0, bad = 0;
    if (st.workers != o.workers) {
        fprintf(stderr, "bench_broker: %d of %d workers connected\n", st.workers, o.workers);
        rc = 1;
    }
    int slots = o.serial > o.inflight ? o.serial : o.inflight;
    double *t_submit = calloc((size_t)slots, sizeof *t_submit);
    double *lat = calloc((size_t)(o.serial > o.jobs ? o.serial : o.jobs), sizeof *lat);
    /* Phase 1: one at a time. */
    int n1 = 0;
    double cpu0 = cpu_us();
    for (int i = 0; !rc && i < o.serial; i++) {
        t_submit[0] = pk_now_ms();
        if (pk_broker_submit_noop(b, (void *)(uintptr_t)0, NULL, &err) ||
            (lat[n1++] = take(pull, t_submit, slots, &bad)) < 0)
            rc = 1;
    }
    double p50_idle = pct(lat, n1, 0.5), p99_idle = pct(lat, n1, 0.99);
    /* Phase 2: K in flight; each slot is resubmitted when its job completes. */
    int submitted = 0, done = 0, n2 = 0;
    double t0 = pk_now_ms();
    for (; !rc && submitted < o.inflight && submitted < o.jobs; submitted++) {
        t_submit[submitted] = pk_now_ms();
        rc = pk_broker_submit_noop(b, (void *)(uintptr_t)submitted, NULL, &err) != PK_OK;
    }
    while (!rc && done < o.jobs) {
        zmq_pollitem_t it = {pull, 0, ZMQ_POLLIN, 0};
        if (zmq_poll(&it, 1, 30000) <= 0) {
            rc = 1;
            break;
        }
        pk_completion *c = NULL;
        if (zmq_recv(pull, &c, sizeof c, 0) != (int)sizeof c || !c)
            continue;
        int slot = (int)(uintptr_t)c->user;
        if (c->harness_rc != PK_ERR_UNSUPPORTED)
            bad++;
        pk_completion_free(c);
        lat[n2++] = pk_now_ms() - t_submit[slot];
        done++;
        if (submitted < o.jobs) {
            t_submit[slot] = pk_now_ms();
            rc = pk_broker_submit_noop(b, (void *)(uintptr_t)slot, NULL, &err) != PK_OK;
            submitted++;
        }
    }
    double wall_s = (pk_now_ms() - t0) / 1000.0;
    double cpu_per_job = (cpu_us() - cpu0) / (n1 + done > 0 ? n1 + done : 1);
    pk_broker_get_stats(b, &st);
    if (rc)
        fprintf(stderr, "bench_broker: stopped early (%s)\n", err.message);
    printf(
        "| workers | CURVE | serial jobs | idle p50 ms | idle p99 ms | jobs | in flight | jobs/s "
        "| loaded p50 ms | loaded p99 ms | longest dispatch round ms | broker process CPU "
        "us/job |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    printf("| %d | %s | %d | %.3f | %.3f | %d | %d | %.0f | %.2f | %.2f | %.3f | %.1f |\n",
           o.workers, o.curve ? "yes" : "no", n1, p50_idle, p99_idle, done, o.inflight,
           done / (wall_s > 0 ? wall_s : 1), pct(lat, n2, 0.5), pct(lat, n2, 0.99),
           st.dispatch_ms_max, cpu_per_job);
    if (bad) {
        fprintf(stderr, "bench_broker: %d completion(s) were not no-ops\n", bad);
        rc = 1;
    }
    if (o.curve && (st.workers_refused || st.handshakes_failed || st.workers_joined == 0)) {
        fprintf(stderr, "bench_broker: CURVE: %llu refused, %llu failed handshakes\n",
                (unsigned long long)st.workers_refused, (unsigned long long)st.handshakes_failed);
        rc = 1;
    }
    pk_broker_shutdown(b, 0);
    for (int k = 0; k < o.workers; k++)
        kill(pids[k], SIGTERM);
    for (int k = 0; k < o.workers; k++) {
        int status = 0;
        /* A worker must stop cleanly on SIGTERM (under ASan: without leaks). */
        if (waitpid(pids[k], &status, 0) != pids[k] || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0) {
            fprintf(stderr, "bench_broker: worker %d did not exit cleanly (status %d)\n", k,
                    status);
            rc = 1;
        }
    }
    while (zmq_recv(pull, &(pk_completion *){NULL}, sizeof(void *), ZMQ_DONTWAIT) >= 0)
        ;
    pk_broker_free(b);
    pk_curve_server_stop(cs);
    zmq_close(pull);
    zmq_ctx_term(ctx);
    free(t_submit);
    free(lat);
    pk_rm_rf(dir);
    return rc;
}
