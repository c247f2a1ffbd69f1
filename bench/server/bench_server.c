/* Closed-loop latency and throughput of one op against a running `pkgym serve`: C client
 * threads, each with its own DEALER socket, one request in flight per client. Optionally keeps
 * steps in flight meanwhile (--load-steps), to show that evaluation does not slow the socket.
 *
 *   bench_server --endpoint E --op hello|reset|OP --clients N --seconds S [--problem P]
 *                [--load-steps K --action-file F] [--pad BYTES]
 *
 * --pad adds a field of that many bytes to each timed request (ignored by the server), to
 * measure what larger frames cost (e.g. CURVE's encryption). CURVE keys come from
 * PKGYM_CURVE_SERVER_KEY / PKGYM_CURVE_CLIENT_KEY (pk_client_connect).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pk_client.h"

typedef struct bench_opts {
    const char *endpoint, *op, *problem, *action_file;
    int clients, load_steps;
    double seconds;
    int pad;
} bench_opts;

typedef struct worker {
    const bench_opts *o;
    double *lat_ms;
    size_t n, cap;
    int errors;
    char first_error[600];
} worker;

static volatile int stop_load;

static void note_error(worker *w, const char *msg) {
    if (w->errors++ == 0)
        snprintf(w->first_error, sizeof w->first_error, "%s", msg);
}

static int reply_ok(json_t *r, worker *w) {
    if (json_is_true(json_object_get(r, "ok")))
        return 1;
    json_t *m = json_object_get(json_object_get(r, "error"), "message");
    note_error(w, json_is_string(m) ? json_string_value(m) : "error reply");
    return 0;
}

static void *run_worker(void *arg) {
    worker *w = arg;
    pk_client *c;
    pk_error err;
    if (pk_client_connect(w->o->endpoint, &c, &err)) {
        note_error(w, err.message);
        return NULL;
    }
    int reset = strcmp(w->o->op, "reset") == 0;
    char *pad = calloc((size_t)w->o->pad + 1, 1);
    if (pad)
        memset(pad, 'p', (size_t)w->o->pad);
    double end = pk_now_ms() + w->o->seconds * 1000.0;
    while (pad && pk_now_ms() < end) {
        json_t *req = reset ? json_pack("{s:s, s:s}", "op", "reset", "problem", w->o->problem)
                            : json_pack("{s:s}", "op", w->o->op);
        if (w->o->pad)
            json_object_set_new(req, "pad", json_string(pad));
        json_t *rep = NULL;
        double t0 = pk_now_ms();
        int rc = pk_client_call(c, req, 10000, &rep, &err);
        double dt = pk_now_ms() - t0;
        json_decref(req);
        if (rc) {
            note_error(w, err.message);
            break;
        }
        if (reply_ok(rep, w)) {
            if (w->n == w->cap) {
                w->cap = w->cap ? w->cap * 2 : 4096;
                w->lat_ms = realloc(w->lat_ms, w->cap * sizeof *w->lat_ms);
            }
            w->lat_ms[w->n++] = dt;
        }
        if (reset && json_is_string(json_object_get(rep, "episode"))) {
            /* Not timed: keeps the number of open episodes bounded. */
            json_t *close =
                json_pack("{s:s, s:O}", "op", "close", "episode", json_object_get(rep, "episode"));
            json_t *crep = NULL;
            if (pk_client_call(c, close, 10000, &crep, &err) == PK_OK)
                json_decref(crep);
            json_decref(close);
        }
        json_decref(rep);
    }
    free(pad);
    pk_client_close(c);
    return NULL;
}

/* Keeps one episode stepping with the given action until stopped. */
static void *run_load(void *arg) {
    worker *w = arg;
    char *action = NULL;
    size_t len;
    pk_client *c = NULL;
    pk_error err;
    if (pk_read_file(w->o->action_file, &action, &len, &err) ||
        pk_client_connect(w->o->endpoint, &c, &err)) {
        note_error(w, err.message);
        free(action);
        return NULL;
    }
    while (!stop_load) {
        json_t *req =
            json_pack("{s:s, s:s, s:i}", "op", "reset", "problem", w->o->problem, "max_turns", 64);
        json_t *rep = NULL;
        int rc = pk_client_call(c, req, 10000, &rep, &err);
        json_decref(req);
        if (rc || !reply_ok(rep, w)) {
            json_decref(rep);
            break;
        }
        json_t *ep = json_incref(json_object_get(rep, "episode"));
        json_decref(rep);
        for (int t = 0; t < 64 && !stop_load; t++) {
            req = json_pack("{s:s, s:O, s:s}", "op", "step", "episode", ep, "action", action);
            rc = pk_client_call(c, req, 600000, &rep, &err);
            json_decref(req);
            if (rc == PK_OK && reply_ok(rep, w))
                w->n++; /* steps done */
            json_decref(rep);
            if (rc)
                break;
        }
        req = json_pack("{s:s, s:O}", "op", "close", "episode", ep);
        if (pk_client_call(c, req, 10000, &rep, &err) == PK_OK)
            json_decref(rep);
        json_decref(req);
        json_decref(ep);
    }
    pk_client_close(c);
    free(action);
    return NULL;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int parse(int argc, char **argv, bench_opts *o) {
    *o = (bench_opts){"tcp://127.0.0.1:5555", "hello", NULL, NULL, 1, 0, 5.0, 0};
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (!strcmp(a, "--endpoint"))
            o->endpoint = v;
        else if (!strcmp(a, "--op"))
            o->op = v;
        else if (!strcmp(a, "--problem"))
            o->problem = v;
        else if (!strcmp(a, "--action-file"))
            o->action_file = v;
        else if (!strcmp(a, "--clients"))
            o->clients = atoi(v);
        else if (!strcmp(a, "--load-steps"))
            o->load_steps = atoi(v);
        else if (!strcmp(a, "--seconds"))
            o->seconds = atof(v);
        else if (!strcmp(a, "--pad"))
            o->pad = atoi(v);
        else
            return -1;
    }
    if (argc % 2 == 0 || o->clients < 1 || o->clients > 1024 || o->seconds <= 0 || o->pad < 0 ||
        o->pad > (1 << 20))
        return -1;
    if ((!strcmp(o->op, "reset") || o->load_steps > 0) && !o->problem)
        return -1;
    return o->load_steps > 0 && !o->action_file ? -1 : 0;
}

int main(int argc, char **argv) {
    bench_opts o;
    if (parse(argc, argv, &o)) {
        fprintf(stderr, "usage: bench_server --endpoint E --op hello|reset|OP --clients N "
                        "--seconds S [--problem P] [--load-steps K --action-file F] "
                        "[--pad BYTES]\n");
        return 2;
    }
    worker *loads = calloc((size_t)o.load_steps + 1, sizeof *loads);
    pthread_t *lt = calloc((size_t)o.load_steps + 1, sizeof *lt);
    for (int i = 0; i < o.load_steps; i++) {
        loads[i].o = &o;
        pthread_create(&lt[i], NULL, run_load, &loads[i]);
    }
    worker *ws = calloc((size_t)o.clients, sizeof *ws);
    pthread_t *th = calloc((size_t)o.clients, sizeof *th);
    double t0 = pk_now_ms();
    for (int i = 0; i < o.clients; i++) {
        ws[i].o = &o;
        pthread_create(&th[i], NULL, run_worker, &ws[i]);
    }
    for (int i = 0; i < o.clients; i++)
        pthread_join(th[i], NULL);
    double wall_s = (pk_now_ms() - t0) / 1000.0;
    /* Steps in flight when timing ended; the load threads stop after their current step. */
    json_t *stats_req = json_pack("{s:s}", "op", "stats");
    json_t *stats = NULL;
    pk_client *sc;
    pk_error err;
    long long in_flight = -1;
    if (pk_client_connect(o.endpoint, &sc, &err) == PK_OK) {
        if (pk_client_call(sc, stats_req, 10000, &stats, &err) == PK_OK)
            in_flight = json_integer_value(json_object_get(stats, "steps_in_flight"));
        pk_client_close(sc);
    }
    json_decref(stats_req);
    json_decref(stats);
    /* The load threads are left in their current step (which may take seconds): their counts
     * are read now and the process exits without joining them. */
    stop_load = 1;
    size_t n = 0, steps = 0;
    int errors = 0;
    for (int i = 0; i < o.clients; i++)
        n += ws[i].n, errors += ws[i].errors;
    for (int i = 0; i < o.load_steps; i++) {
        steps += loads[i].n;
        errors += loads[i].errors;
    }
    double *all = malloc((n ? n : 1) * sizeof *all);
    size_t k = 0;
    for (int i = 0; i < o.clients; i++) {
        if (ws[i].n) /* a client that never got a reply has no array */
            memcpy(all + k, ws[i].lat_ms, ws[i].n * sizeof *all);
        k += ws[i].n;
    }
    qsort(all, n, sizeof *all, cmp_double);
    double p50 = n ? all[n / 2] : 0, p99 = n ? all[(size_t)((double)n * 0.99)] : 0;
    printf("op=%s clients=%d pad=%d load_steps=%d seconds=%.1f requests=%zu errors=%d "
           "throughput=%.0f/s p50_ms=%.3f p99_ms=%.3f max_ms=%.3f steps_done=%zu "
           "steps_in_flight_at_end=%lld\n",
           o.op, o.clients, o.pad, o.load_steps, wall_s, n, errors, (double)n / wall_s, p50, p99,
           n ? all[n - 1] : 0, steps, in_flight);
    for (int i = 0; i < o.clients; i++)
        if (ws[i].errors)
            fprintf(stderr, "client %d: %d error(s), first: %s\n", i, ws[i].errors,
                    ws[i].first_error);
    for (int i = 0; i < o.load_steps; i++)
        if (loads[i].errors)
            fprintf(stderr, "load %d: %d error(s), first: %s\n", i, loads[i].errors,
                    loads[i].first_error);
    for (int i = 0; i < o.clients; i++)
        free(ws[i].lat_ms);
    free(all);
    free(ws);
    free(th);
    fflush(stdout);
    fflush(stderr);
    if (o.load_steps > 0)
        _exit(errors ? 1 : 0); /* load threads still hold their sockets */
    free(loads);
    free(lt);
    return errors ? 1 : 0;
}
