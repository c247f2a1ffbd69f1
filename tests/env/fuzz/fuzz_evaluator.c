/* The server-loop fuzzer's evaluator (env/src/evaluator.h): every submitted step completes at
 * once, its verdict drawn from the candidate's source, so the fuzzer reaches the completion path
 * (feedback, returns, store commit, next prompt) without compiling or running model code. Only
 * the fuzz target links it; pkgym links env/src/evaluator.c. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <zmq.h>

#include "evaluator.h"

static void *push_sock;
static uint64_t next_ticket = 1;

int pk_evaluator_start(pk_evaluator *ev, const pk_evaluator_opts *o, pk_error *err) {
    memset(ev, 0, sizeof *ev);
    ev->local_gpus = 1;
    push_sock = zmq_socket(o->zmq_ctx, ZMQ_PUSH);
    int unlimited = 0;
    if (!push_sock || zmq_setsockopt(push_sock, ZMQ_SNDHWM, &unlimited, sizeof unlimited) ||
        zmq_connect(push_sock, o->done_endpoint))
        return pk_error_set(err, PK_ERR_SYSTEM, "fuzz evaluator: %s", zmq_strerror(zmq_errno()));
    return PK_OK;
}

int pk_evaluator_submit(pk_evaluator *ev, const pk_problem *p, const char *source,
                        const pk_eval_opts *opts, const char *gpu_model, void *user,
                        uint64_t *ticket, pk_error *err) {
    (void)ev, (void)p, (void)opts, (void)gpu_model;
    size_t n = strlen(source);
    /* A source ending in "!" is refused, as a full queue would be. */
    if (n > 0 && source[n - 1] == '!')
        return pk_error_set(err, PK_ERR_BUSY, "fuzz evaluator: queue full");
    pk_completion *c = calloc(1, sizeof *c);
    if (!c)
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    c->ticket = *ticket = next_ticket++;
    c->user = user;
    pk_eval_result_init(&c->result);
    unsigned char last = n ? (unsigned char)source[n - 1] : 0;
    c->harness_rc = last == '#' ? PK_ERR_SYSTEM : 0;
    c->result.status = (pk_status)(last % PK_STATUS_COUNT);
    if (c->result.status == PK_STATUS_CORRECT) {
        c->result.has_timing = 1;
        c->result.speedup = 1.0 + (double)(last % 7);
        c->result.candidate.median_us = 10.0;
    }
    if (zmq_send(push_sock, &c, sizeof c, 0) != (int)sizeof c) {
        pk_completion_free(c);
        return pk_error_set(err, PK_ERR_SYSTEM, "fuzz evaluator: send failed");
    }
    return PK_OK;
}

void pk_evaluator_stats(pk_evaluator *ev, pk_scheduler_stats *out) {
    (void)ev;
    memset(out, 0, sizeof *out);
    out->done = next_ticket - 1;
}

json_t *pk_evaluator_stats_json(pk_evaluator *ev) {
    (void)ev;
    return NULL;
}

void pk_evaluator_shutdown(pk_evaluator *ev, int grace_ms) {
    (void)ev, (void)grace_ms;
}

void pk_evaluator_free(pk_evaluator *ev) {
    (void)ev;
    if (push_sock)
        zmq_close(push_sock);
    push_sock = NULL;
}
