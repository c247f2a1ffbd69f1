/* One rank of a job: load the problem module and the candidate, set up buffers, run the
 * correctness trials (candidate first, into poisoned outputs), then time both. */
#define _GNU_SOURCE
#include "pk_runner.h"

#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ALIGN 4096

typedef struct rank_state {
    const rn_opts *o;
    rn_group *g;
    rn_backend b;
    pk_ctx ctx;
    pk_problem *p;
    pk_problem_sizes sz;
    void *mod_handle, *cand_handle;
    const pk_problem_module *mod;
    void *cand_fn;
    int (*init_fn)(const pk_ctx *);
    int (*fini_fn)(const pk_ctx *);
    int copies;
    size_t set_bytes, arg_off[PK_MAX_ARGS], arg_bytes[PK_MAX_ARGS];
    void *ref_out[PK_MAX_ARGS], *pristine[PK_MAX_ARGS], *snap[PK_MAX_ARGS];
    double atol, rtol;
} rank_state;

/* What each rank tells the others after a step. */
typedef struct rank_step {
    int failed; /* runtime failure on this rank */
    char msg[400];
    int inputs_modified;
    double max_abs, max_rel;
    int mismatch;
    char arg[32];
    long long index;
    double expected, got;
    int unsynchronized;
    double init_ms, arena_ms;
} rank_step;

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static size_t align_up(size_t x) {
    return (x + ALIGN - 1) / ALIGN * ALIGN;
}

static void *arg_ptr(rank_state *rs, int slot, int i) {
    return (char *)rs->ctx.sym_base + (size_t)slot * rs->set_bytes + rs->arg_off[i];
}

static void make_call(rank_state *rs, int slot, int ref_outputs, pk_problem_call *c) {
    memset(c, 0, sizeof *c);
    c->ctx = &rs->ctx;
    c->n_args = rs->p->n_args;
    for (int i = 0; i < c->n_args; i++) {
        int out = rs->p->args[i].role != PK_ARG_INPUT;
        c->args[i] = ref_outputs && out ? rs->ref_out[i] : arg_ptr(rs, slot, i);
        c->counts[i] = rs->sz.counts[i];
    }
    c->n_dims = rs->p->n_dims;
    memcpy(c->dims, rs->sz.dims, sizeof c->dims);
    c->root = rs->p->root;
}

static int call_candidate(rank_state *rs, const pk_problem_call *c) {
    return rs->o->reference_as_candidate ? rs->mod->reference(c) : rs->mod->invoke(rs->cand_fn, c);
}

static int fail(rank_step *st, const char *fmt, const char *what) {
    st->failed = 1;
    snprintf(st->msg, sizeof st->msg, fmt, what);
    return -1;
}

/* Shares every rank's step; returns the first failing rank or -1. */
static int exchange(rank_state *rs, rank_step *mine, rank_step *all) {
    if (rs->g->allgather(rs->g, mine, all, sizeof *mine))
        return -2;
    for (int r = 0; r < rs->g->world; r++)
        if (all[r].failed)
            return r;
    return -1;
}

static int load_module(rank_state *rs, rank_step *st) {
    rs->mod_handle = dlopen(rs->o->module, RTLD_NOW | RTLD_LOCAL);
    if (!rs->mod_handle)
        return fail(st, "cannot load the problem module: %s", dlerror());
    const pk_problem_module *(*get)(void) =
        (const pk_problem_module *(*)(void))dlsym(rs->mod_handle, "pk_problem_module_v1");
    rs->mod = get ? get() : NULL;
    if (!rs->mod || rs->mod->abi_version != PK_PROBLEM_ABI_VERSION)
        return fail(st, "problem module %s has no compatible pk_problem_module_v1", rs->o->module);
    return 0;
}

/* The candidate is loaded last, after the harness's own setup (and, warm, after go). */
static int load_candidate(rank_state *rs, rank_step *st) {
    if (rs->o->reference_as_candidate)
        return 0;
    rs->cand_handle = dlopen(rs->o->candidate, RTLD_NOW | RTLD_LOCAL);
    if (!rs->cand_handle)
        return fail(st, "cannot load the compiled solution: %s", dlerror());
    rs->cand_fn = dlsym(rs->cand_handle, rs->p->entry);
    if (!rs->cand_fn)
        return fail(st, "entry point %s not found", rs->p->entry);
    *(void **)&rs->init_fn = dlsym(rs->cand_handle, "solution_init");
    *(void **)&rs->fini_fn = dlsym(rs->cand_handle, "solution_fini");
    return 0;
}

static int setup_buffers(rank_state *rs, rank_step *st) {
    rs->set_bytes = 0;
    for (int i = 0; i < rs->p->n_args; i++) {
        rs->arg_bytes[i] = rs->sz.counts[i] * pk_dtype_size(rs->p->args[i].dtype);
        rs->arg_off[i] = rs->set_bytes;
        rs->set_bytes += align_up(rs->arg_bytes[i]);
    }
    /* Enough rotating copies of the argument set to exceed l2_multiple x L2 (GPU). */
    rs->copies = 2;
    if (rs->b.l2_bytes && rs->set_bytes) {
        double need = rs->p->l2_multiple * (double)rs->b.l2_bytes / (double)rs->set_bytes;
        int c = (int)ceil(need);
        rs->copies = c > rs->copies ? c : rs->copies;
    }
    if (rs->copies > 64)
        rs->copies = 64;
    size_t scratch = align_up((size_t)rs->p->scratch_bytes);
    size_t arena = (size_t)rs->copies * rs->set_bytes + scratch;
    if (rs->b.setup_arena(&rs->b, &rs->ctx, arena ? arena : ALIGN))
        return fail(st, "arena setup failed: %s", rs->b.error);
    rs->ctx.scratch = (char *)rs->ctx.sym_base + (size_t)rs->copies * rs->set_bytes;
    rs->ctx.scratch_size = scratch;
    for (int i = 0; i < rs->p->n_args; i++) {
        size_t n = rs->arg_bytes[i] ? rs->arg_bytes[i] : 1;
        rs->ref_out[i] = rs->b.alloc_reference ? rs->b.alloc_reference(&rs->b, n)
                                               : rs->b.alloc_private(&rs->b, n);
        rs->pristine[i] = rs->b.alloc_private(&rs->b, n);
        rs->snap[i] = rs->b.alloc_private(&rs->b, n);
        if (!rs->ref_out[i] || !rs->pristine[i] || !rs->snap[i])
            return fail(st, "out of memory for private buffers%s", "");
    }
    pk_dtype_tolerance(rs->p->args[0].dtype, &rs->atol, &rs->rtol);
    if (rs->p->atol >= 0) {
        rs->atol = rs->p->atol;
        rs->rtol = rs->p->rtol;
    }
    return 0;
}

/* Fresh inputs for `trial` in `slot`, pristine copies, poisoned outputs. */
static int prepare_slot(rank_state *rs, int slot, int trial, rank_step *st) {
    int rc = 0;
    for (int i = 0; i < rs->p->n_args && !rc; i++) {
        const pk_arg_spec *a = &rs->p->args[i];
        void *dst = arg_ptr(rs, slot, i);
        if (a->role == PK_ARG_OUTPUT)
            rc = rs->b.poison(&rs->b, dst, a->dtype, rs->sz.counts[i]) ||
                 rs->b.poison(&rs->b, rs->ref_out[i], a->dtype, rs->sz.counts[i]);
        else
            rc = rs->b.generate(&rs->b, dst, a->dtype, rs->sz.counts[i],
                                rn_stream_key(rs->o->seed, trial, rs->ctx.rank, i));
    }
    if (!rc && rs->mod->generate) { /* problem-specific inputs (e.g. valid indices) */
        pk_problem_call c;
        make_call(rs, slot, 0, &c);
        rc = rs->mod->generate(&c, rs->o->seed, trial);
    }
    for (int i = 0; i < rs->p->n_args && !rc; i++) {
        const pk_arg_spec *a = &rs->p->args[i];
        if (a->role == PK_ARG_OUTPUT)
            continue;
        rc = rs->b.copy(&rs->b, rs->pristine[i], arg_ptr(rs, slot, i), rs->arg_bytes[i]);
        if (!rc && a->role == PK_ARG_INOUT)
            rc = rs->b.copy(&rs->b, rs->ref_out[i], arg_ptr(rs, slot, i), rs->arg_bytes[i]);
    }
    if (rc || rs->b.sync(&rs->b))
        return fail(st, "input generation failed: %s", rs->b.error);
    return 0;
}

static int check_trial(rank_state *rs, int trial, rank_step *st) {
    int slot = trial % rs->copies;
    if (prepare_slot(rs, slot, trial, st))
        return -1;
    pk_problem_call c;
    make_call(rs, slot, 0, &c);
    if (rs->g->barrier(rs->g))
        return fail(st, "rank barrier failed%s", "");
    rn_progress(rs->o->progress_dir, rs->ctx.rank, "candidate", trial);
    int rc = call_candidate(rs, &c);
    /* Only ctx->stream is waited for: work left on another stream shows up as wrong output. */
    int sync_rc = rs->b.sync_stream ? rs->b.sync_stream(&rs->b, &rs->ctx) : rs->b.sync(&rs->b);
    rn_progress(rs->o->progress_dir, rs->ctx.rank, "harness", trial);
    if (rc) {
        snprintf(st->msg, sizeof st->msg, "%s returned %d on rank %d", rs->p->entry, rc,
                 rs->ctx.rank);
        st->failed = 1;
        return -1;
    }
    if (sync_rc)
        return fail(st, "CUDA error after the solution ran: %s", rs->b.error);
    for (int i = 0; i < rs->p->n_args; i++) {
        const pk_arg_spec *a = &rs->p->args[i];
        if (a->role != PK_ARG_INPUT && rs->b.copy(&rs->b, rs->snap[i], c.args[i], rs->arg_bytes[i]))
            return fail(st, "%s", rs->b.error);
    }
    for (int i = 0; i < rs->p->n_args; i++) {
        if (rs->p->args[i].role != PK_ARG_INPUT)
            continue;
        int eq = 1;
        if (rs->b.equal(&rs->b, c.args[i], rs->pristine[i], rs->arg_bytes[i], &eq))
            return fail(st, "%s", rs->b.error);
        if (!eq) {
            st->inputs_modified = 1;
            rs->b.copy(&rs->b, c.args[i], rs->pristine[i], rs->arg_bytes[i]);
        }
    }
    pk_problem_call rc_call;
    make_call(rs, slot, 1, &rc_call);
    rn_progress(rs->o->progress_dir, rs->ctx.rank, "reference", trial);
    if (rs->mod->reference(&rc_call) || rs->b.sync(&rs->b))
        return fail(st, "the reference failed: %s", rs->b.error);
    rn_progress(rs->o->progress_dir, rs->ctx.rank, "harness", trial);
    st->index = -1;
    for (int i = 0; i < rs->p->n_args; i++) {
        const pk_arg_spec *a = &rs->p->args[i];
        if (a->role == PK_ARG_INPUT || a->check == PK_CHECK_NONE ||
            (a->check == PK_CHECK_ROOT && rs->ctx.rank != rs->p->root))
            continue;
        rn_compare cmp;
        if (rs->b.compare(&rs->b, rs->snap[i], rs->ref_out[i], a->dtype, rs->sz.counts[i], rs->atol,
                          rs->rtol, &cmp))
            return fail(st, "%s", rs->b.error);
        st->max_abs = fmax(st->max_abs, cmp.max_abs);
        st->max_rel = fmax(st->max_rel, cmp.max_rel);
        if (cmp.bad_index >= 0 && !st->mismatch) {
            st->mismatch = 1;
            snprintf(st->arg, sizeof st->arg, "%s", a->name);
            st->index = cmp.bad_index;
            st->expected = cmp.expected;
            st->got = cmp.got;
        }
    }
    return 0;
}

static void record_trial(rank_state *rs, const rank_step *all, rn_report *rep) {
    pk_trial_verdict *v = &rep->trials[rep->n_trials++];
    memset(v, 0, sizeof *v);
    v->passed = 1;
    for (int r = 0; r < rs->g->world; r++) {
        v->max_abs_err = fmax(v->max_abs_err, all[r].max_abs);
        v->max_rel_err = fmax(v->max_rel_err, all[r].max_rel);
        if (all[r].inputs_modified) {
            v->inputs_modified = 1;
            v->passed = 0;
        }
        if (all[r].mismatch) {
            pk_rank_mismatch *m = &v->mismatch[v->n_mismatch++];
            m->rank = r;
            snprintf(m->arg, sizeof m->arg, "%s", all[r].arg);
            m->index = all[r].index;
            m->expected = all[r].expected;
            m->got = all[r].got;
            v->passed = 0;
        }
    }
}

typedef struct timed_arg {
    rank_state *rs;
    int reference;
} timed_arg;

static int timed_call(void *arg, int i) {
    timed_arg *t = arg;
    pk_problem_call c;
    make_call(t->rs, i % t->rs->copies, 0, &c);
    return t->reference ? t->rs->mod->reference(&c) : call_candidate(t->rs, &c);
}

/* Warm-up bounded by count and time; rank 0 decides when to stop so all ranks agree. */
static int warm_up(rank_state *rs, timed_arg *t, int *done_iters) {
    double start = now_ms(), scratch[16], host;
    int done = 0;
    for (;;) {
        int stop = done >= rs->p->warmup_iters || now_ms() - start >= rs->p->warmup_ms;
        if (rn_group_broadcast(rs->g, &stop, sizeof stop, 0))
            return -1;
        if (stop)
            break;
        int chunk = rs->p->warmup_iters - done < 16 ? rs->p->warmup_iters - done : 16;
        if (rs->b.time_calls(&rs->b, timed_call, t, chunk, scratch, &host))
            return -1;
        done += chunk;
    }
    *done_iters = done;
    return 0;
}

static int time_both(rank_state *rs, rn_report *rep, rank_step *st) {
    int iters = rs->p->iters < RN_MAX_TIMED_ITERS ? rs->p->iters : RN_MAX_TIMED_ITERS;
    for (int s = 0; s < rs->copies; s++)
        if (prepare_slot(rs, s, rs->o->trials + s, st))
            return -1;
    static double mine[2][RN_MAX_TIMED_ITERS], all[PK_MAX_RANKS * RN_MAX_TIMED_ITERS];
    double host_total[2] = {0, 0}, event_total[2] = {0, 0};
    int warm[2] = {0, 0};
    const int blocks = iters >= 2 ? 2 : 1; /* candidate and reference interleaved */
    const int n_who = rs->o->skip_reference_timing ? 1 : 2;
    for (int who = 0; who < n_who; who++) {
        timed_arg t = {rs, who};
        if (warm_up(rs, &t, &warm[who]))
            return fail(st, "warm-up failed: %s", rs->b.error);
    }
    for (int blk = 0; blk < blocks; blk++) {
        int lo = iters * blk / blocks, n = iters * (blk + 1) / blocks - lo;
        for (int who = 0; who < n_who; who++) {
            timed_arg t = {rs, who};
            double host = 0;
            if (rs->g->barrier(rs->g))
                return fail(st, "rank barrier failed%s", "");
            rn_progress(rs->o->progress_dir, rs->ctx.rank, who ? "reference" : "candidate", -1);
            if (rs->b.time_calls(&rs->b, timed_call, &t, n, mine[who] + lo, &host))
                return fail(st, "timing failed: %s", rs->b.error);
            host_total[who] += host;
            for (int i = lo; i < lo + n; i++)
                event_total[who] += mine[who][i];
        }
    }
    rn_progress(rs->o->progress_dir, rs->ctx.rank, "harness", -1);
    /* Work outside the timed stream: the host saw the loop take much longer than the events. */
    if (rs->b.gpu && host_total[0] > 1.5 * event_total[0] + 50.0 * iters) {
        st->unsynchronized = 1;
        snprintf(st->msg, sizeof st->msg,
                 "rank %d: timed loop took %.0f us by host clock but %.0f us on ctx->stream",
                 rs->ctx.rank, host_total[0], event_total[0]);
    }
    pk_timing *out[2] = {&rep->candidate, &rep->reference};
    for (int who = 0; who < n_who; who++) {
        if (rs->g->allgather(rs->g, mine[who], all, sizeof(double) * (size_t)iters))
            return fail(st, "rank gather failed%s", "");
        double per_iter[RN_MAX_TIMED_ITERS];
        for (int i = 0; i < iters; i++) {
            per_iter[i] = 0;
            for (int r = 0; r < rs->g->world; r++)
                per_iter[i] = fmax(per_iter[i], all[(size_t)r * (size_t)iters + (size_t)i]);
        }
        rn_timing_stats(per_iter, iters, out[who]);
        out[who]->warmup_iters = warm[who];
    }
    return 0;
}

static void teardown(rank_state *rs) {
    if (rs->fini_fn)
        rs->fini_fn(&rs->ctx);
    for (int i = 0; i < PK_MAX_ARGS; i++) {
        if (rs->b.free_private) {
            rs->b.free_private(&rs->b, rs->ref_out[i]);
            rs->b.free_private(&rs->b, rs->pristine[i]);
            rs->b.free_private(&rs->b, rs->snap[i]);
        }
    }
    if (rs->b.fini)
        rs->b.fini(&rs->b, &rs->ctx);
}

/* Runs one phase on every rank and reports the first failure into rep; returns 1 to stop. */
static int phase_failed(rank_state *rs, rank_step *st, rn_report *rep, rank_step *all) {
    int bad = exchange(rs, st, all);
    if (bad == -1)
        return 0;
    rep->ok = 0;
    if (bad == -2) {
        snprintf(rep->error, sizeof rep->error, "the harness lost contact between ranks");
    } else {
        rep->error_rank = bad;
        snprintf(rep->error, sizeof rep->error, "rank %d: %s", bad, all[bad].msg);
    }
    return 1;
}

static int run_rank(rank_state *rs, rn_report *rep) {
    static rank_step all[PK_MAX_RANKS];
    rank_step st = {0};
    double t0 = now_ms();
    int init_rc = rs->p->device_gpu ? rn_backend_gpu_init(&rs->b, &rs->ctx, rs->g)
                                    : rn_backend_host_init(&rs->b, &rs->ctx);
    st.init_ms = now_ms() - t0;
    double t_arena = now_ms();
    int ready = 0;
    if (init_rc)
        fail(&st, "device setup failed: %s", rs->b.error);
    else
        ready = !load_module(rs, &st) && !setup_buffers(rs, &st);
    st.arena_ms = now_ms() - t_arena;
    if (rs->o->wait_go) { /* warm: everything above overlaps the compile */
        rn_progress(rs->o->progress_dir, rs->ctx.rank, "warm", -1);
        if (!rn_wait_go(rs->o->progress_dir)) {
            rep->aborted = 1;
            return 0;
        }
        rn_progress(rs->o->progress_dir, rs->ctx.rank, "setup", -1);
        t0 = now_ms(); /* setup is counted from go */
    }
    if (ready && !load_candidate(rs, &st) && rs->init_fn) {
        rn_progress(rs->o->progress_dir, rs->ctx.rank, "candidate", -1);
        if (rs->init_fn(&rs->ctx))
            fail(&st, "solution_init failed%s", "");
        rn_progress(rs->o->progress_dir, rs->ctx.rank, "harness", -1);
    }
    snprintf(rep->gpu_name, sizeof rep->gpu_name, "%s", rs->b.name);
    if (phase_failed(rs, &st, rep, all))
        return 0;
    for (int r = 0; r < rs->g->world; r++) {
        rep->init_ms = fmax(rep->init_ms, all[r].init_ms);
        rep->arena_ms = fmax(rep->arena_ms, all[r].arena_ms);
    }
    rep->setup_ms = now_ms() - t0;
    t0 = now_ms();
    int all_passed = 1;
    for (int trial = 0; trial < rs->o->trials && all_passed; trial++) {
        memset(&st, 0, sizeof st);
        check_trial(rs, trial, &st);
        if (phase_failed(rs, &st, rep, all))
            return 0;
        record_trial(rs, all, rep);
        all_passed = rep->trials[rep->n_trials - 1].passed;
    }
    rep->check_ms = now_ms() - t0;
    rep->ok = 1;
    if (!all_passed || rs->o->skip_timing)
        return 0;
    t0 = now_ms();
    memset(&st, 0, sizeof st);
    time_both(rs, rep, &st);
    if (phase_failed(rs, &st, rep, all))
        return 0;
    rep->timing_ms = now_ms() - t0;
    rep->timed = 1;
    for (int r = 0; r < rs->g->world; r++)
        if (all[r].unsynchronized && !rep->unsynchronized) {
            rep->unsynchronized = 1;
            snprintf(rep->unsync_detail, sizeof rep->unsync_detail, "%s", all[r].msg);
        }
    return 0;
}

int rn_rank_main(const rn_opts *o, rn_group *g) {
    static rank_state rs;
    static rn_report rep;
    memset(&rs, 0, sizeof rs);
    memset(&rep, 0, sizeof rep);
    rs.o = o;
    rs.g = g;
    rs.ctx.abi_version = PK_CTX_ABI_VERSION;
    rs.ctx.rank = g->rank;
    rs.ctx.world_size = g->world;
    rn_progress(o->progress_dir, g->rank, "setup", -1);
    snprintf(rep.launcher, sizeof rep.launcher, "%s", o->launcher);
    pk_error err;
    if (pk_problem_load_dir(o->problem_dir, o->suite, o->name, NULL, &rs.p, &err) ||
        pk_problem_sizes_at(rs.p, g->world, &rs.sz, &err)) {
        fprintf(stderr, "pk-runner: %s\n", err.message);
        return 3;
    }
    if (!rs.p->device_gpu)
        rs.ctx.mpi_comm = rn_group_mpi_comm(g);
    run_rank(&rs, &rep);
    teardown(&rs);
    rn_progress(o->progress_dir, g->rank, "done", -1);
    int rc = 0;
    if (g->rank == 0 && !rep.aborted && rn_report_write(o->out, &rep)) {
        fprintf(stderr, "pk-runner: cannot write %s\n", o->out);
        rc = 3;
    }
    pk_problem_free(rs.p);
    return rc;
}
