/* One rank of a job: load the problem module and the candidate, set up buffers, run the
 * correctness trials (candidate first, into poisoned outputs), then time both (timing.c). */
#define _GNU_SOURCE
#include "pk_runner.h"
#include "rn_gpu_lock.h"

#include <dlfcn.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void *rn_arg_ptr(rank_state *rs, int slot, int i) {
    return (char *)rs->ctx.sym_base + (size_t)slot * rs->lay.set_bytes + rs->lay.arg_off[i];
}

uint64_t rn_arg_key(const rank_state *rs, int key, int arg) {
    /* Replicated and sharded arguments are one draw for all ranks: rank 0's stream. */
    int rank = rs->p->args[arg].gen.scope == PK_GEN_PER_RANK ? rs->ctx.rank : 0;
    return rn_stream_key(rs->o->seed, key, rank, arg);
}

void rn_make_call(rank_state *rs, int slot, int ref_outputs, pk_problem_call *c) {
    memset(c, 0, sizeof *c);
    c->ctx = &rs->ctx;
    c->n_args = rs->p->n_args;
    for (int i = 0; i < c->n_args; i++) {
        int out = rs->p->args[i].role != PK_ARG_INPUT;
        c->args[i] = ref_outputs && out ? rs->ref_out[i] : rn_arg_ptr(rs, slot, i);
        c->counts[i] = rs->sz.counts[i];
    }
    c->n_dims = rs->p->n_dims;
    memcpy(c->dims, rs->sz.dims, sizeof c->dims);
    c->root = rs->p->root;
    c->n_params = rs->p->n_params;
    memcpy(c->params, rs->slot_params[slot], sizeof c->params);
}

/* generate() is given the stream the harness's own generation went to, not ctx->stream (the
 * timed stream): on another stream it would race with the inputs it builds on, and what
 * follows on the harness stream would not wait for it. */
static int module_generate(rank_state *rs, int slot, int key) {
    pk_problem_call c;
    rn_make_call(rs, slot, 0, &c);
    pk_ctx gen_ctx = rs->ctx;
    void *stream = rs->b.current_stream ? rs->b.current_stream(&rs->b) : NULL;
    if (stream)
        gen_ctx.stream = (cudaStream_t)stream;
    c.ctx = &gen_ctx;
    return rs->mod->generate(&c, rs->o->seed, key);
}

int rn_generate_inputs(rank_state *rs, int slot, int key) {
    int rc = rn_set_slot_key(rs, slot, key);
    for (int i = 0; i < rs->p->n_args && !rc; i++) {
        const pk_arg_spec *a = &rs->p->args[i];
        if (a->role == PK_ARG_OUTPUT)
            continue;
        rn_gen g;
        rn_gen_for_call(rs, key, i, &g);
        rc = rs->b.generate(&rs->b, rn_arg_ptr(rs, slot, i), a->dtype, rs->sz.counts[i],
                            rn_arg_key(rs, key, i), &g);
    }
    if (!rc && rs->mod->generate) /* problem-specific inputs */
        rc = module_generate(rs, slot, key);
    return rc;
}

int rn_set_slot_key(rank_state *rs, int slot, int key) {
    pk_error err;
    rs->slot_key[slot] = key;
    if (pk_problem_params_at(rs->p, &rs->sz, key, rs->slot_params[slot], &err)) {
        snprintf(rs->b.error, sizeof rs->b.error, "params: %.240s", err.message);
        return -1;
    }
    return 0;
}

int rn_call_candidate(rank_state *rs, const pk_problem_call *c) {
    return rs->o->reference_as_candidate ? rs->mod->reference(c) : rs->mod->invoke(rs->cand_fn, c);
}

/* Shares every rank's step; returns the first failing rank, -1 if none, -2 if the exchange
 * itself failed. */
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
        return rn_fail(st, "cannot load the problem module: %s", dlerror());
    const pk_problem_module *(*get)(void) =
        (const pk_problem_module *(*)(void))dlsym(rs->mod_handle, "pk_problem_module_v1");
    rs->mod = get ? get() : NULL;
    if (!rs->mod || rs->mod->abi_version < 1 || rs->mod->abi_version > PK_PROBLEM_ABI_VERSION)
        return rn_fail(st, "problem module %s has no compatible pk_problem_module_v1",
                       rs->o->module);
    return 0;
}

/* Module ABI 2: the problem's own one-time setup (handles, workspaces, sub-communicators). */
static int init_module(rank_state *rs, rank_step *st) {
    if (rs->mod->abi_version < 2 || !rs->mod->init)
        return 0;
    if (rs->mod->init(&rs->ctx))
        return rn_fail(st, "the problem module's init() failed (a harness problem, not yours)");
    rs->module_ready = 1;
    return 0;
}

/* The candidate is loaded last, after the harness's own setup (and, warm, after go). */
static int load_candidate(rank_state *rs, rank_step *st) {
    if (rs->o->reference_as_candidate)
        return 0;
    rs->cand_handle = dlopen(rs->o->candidate, RTLD_NOW | RTLD_LOCAL);
    if (!rs->cand_handle)
        return rn_fail(st, "cannot load the compiled solution: %s", dlerror());
    rs->cand_fn = dlsym(rs->cand_handle, rs->p->entry);
    if (!rs->cand_fn)
        return rn_fail(st, "entry point %s not found", rs->p->entry);
    *(void **)&rs->init_fn = dlsym(rs->cand_handle, "solution_init");
    *(void **)&rs->fini_fn = dlsym(rs->cand_handle, "solution_fini");
    return 0;
}

/* Sample positions of every argument and the buffers verified timed calls are copied into. */
static int setup_samples(rank_state *rs, rank_step *st) {
    rs->sample_bytes = 0;
    for (int i = 0; i < rs->p->n_args; i++) {
        size_t count = rs->sz.counts[i];
        /* A custom check() needs the whole output: sampled in full, in order. */
        int whole = rs->p->args[i].checker == PK_CHECKER_CUSTOM;
        rs->n_samples[i] = whole || count < RN_SAMPLES ? count : RN_SAMPLES;
        rs->sample_off[i] = rs->sample_bytes;
        rs->sample_bytes += (rs->n_samples[i] * pk_dtype_size(rs->p->args[i].dtype) + 15) / 16 * 16;
        rs->pos[i] = rs->b.alloc_private(&rs->b, (rs->n_samples[i] + 1) * sizeof(uint64_t));
        if (!rs->pos[i] ||
            rs->b.sample_positions(&rs->b, rs->pos[i], rs->plan.sample_key + ((uint64_t)i << 40),
                                   count, rs->n_samples[i]))
            return rn_fail(st, "cannot set up sample positions: %s", rs->b.error);
    }
    size_t per_call = rs->sample_bytes ? rs->sample_bytes : 16;
    rs->snaps = rs->b.alloc_private(&rs->b, per_call * RN_MAX_VERIFIED);
    rs->discard = rs->b.alloc_private(&rs->b, per_call);
    rs->check_buf = rs->b.alloc_private(&rs->b, per_call);
    if (!rs->snaps || !rs->discard || !rs->check_buf)
        return rn_fail(st, "out of memory for verification buffers");
    return 0;
}

static int setup_buffers(rank_state *rs, rank_step *st) {
    for (int i = 0; i < rs->p->n_args; i++) {
        const pk_gen_spec *g = &rs->p->args[i].gen;
        uint64_t offset =
            g->scope == PK_GEN_SHARDED ? (uint64_t)rs->ctx.rank * (uint64_t)rs->sz.counts[i] : 0;
        memset(&rs->gen[i], 0,
               sizeof rs->gen[i]); /* regime iid; rn_gen_for_call sets each call's */
        rs->gen[i].kind = (int)g->kind;
        rs->gen[i].a = g->a;
        rs->gen[i].b = g->b;
        rs->gen[i].lo = rs->sz.gen_lo[i];
        rs->gen[i].hi = rs->sz.gen_hi[i];
        rs->gen[i].offset = offset;
    }
    if (rn_layout_make(rs->p, &rs->sz, rs->b.l2_bytes, &rs->lay))
        return rn_fail(st, "too many arguments and slots for the guard zones");
    rn_plan_make(rs->o->seed, rs->o->trials, rs->p->warmup_iters, rs->p->iters,
                 rs->p->timing_blocks, rs->lay.copies, &rs->plan);
    /* NCCL makes no device communicator for one rank (ncclInvalidUsage); world 1 runs only the
     * reference (job.c's single-GPU diagnostic), which never uses one. */
    rs->b.device_api = rs->p->device_api && rs->ctx.world_size > 1;
    /* The most calls one time_calls runs: a timed block and its lead-in, or a warm-up chunk. */
    rs->b.max_timed_calls = 16;
    for (int side = 0; side < 2; side++)
        for (int blk = 0; blk < rs->plan.blocks; blk++)
            if (rs->plan.block[side][blk].n + 1 > rs->b.max_timed_calls)
                rs->b.max_timed_calls = rs->plan.block[side][blk].n + 1;
    if (rs->b.setup_arena(&rs->b, &rs->ctx, rs->lay.arena_bytes))
        return rn_fail(st, "arena setup failed: %s", rs->b.error);
    rs->ctx.scratch = (char *)rs->ctx.sym_base + rs->lay.scratch_off;
    rs->ctx.scratch_size = rs->lay.scratch_bytes;
    size_t zone_bytes = sizeof(rn_zone) * (size_t)rs->lay.n_zones;
    rs->zones_dev = rs->b.alloc_private(&rs->b, zone_bytes);
    if (!rs->zones_dev)
        return rn_fail(st, "out of memory for the guard zones");
    rs->b.use_timed_stream(&rs->b, 0);
    if (rs->b.gpu ? rs->b.copy(&rs->b, rs->zones_dev, rs->lay.zones, zone_bytes) != 0
                  : (memcpy(rs->zones_dev, rs->lay.zones, zone_bytes), 0))
        return rn_fail(st, "cannot copy the guard zones: %s", rs->b.error);
    if (rs->b.fill_guards(&rs->b, rs->ctx.sym_base, rs->zones_dev, rs->lay.n_zones,
                          rs->plan.guard_seed))
        return rn_fail(st, "cannot fill the guard zones: %s", rs->b.error);
    /* Reference outputs and snapshots exist for outputs (and in-outs) only, pristine copies
     * for inputs (and in-outs) only: nothing reads the others, and on GPUs each reference
     * output is a collective window registration (issue 30: set-up diet). */
    for (int i = 0; i < rs->p->n_args; i++) {
        size_t n = rs->lay.arg_bytes[i] ? rs->lay.arg_bytes[i] : 1;
        int out = rs->p->args[i].role != PK_ARG_INPUT, in = rs->p->args[i].role != PK_ARG_OUTPUT;
        if (out) {
            rs->ref_out[i] = rs->b.alloc_reference ? rs->b.alloc_reference(&rs->b, n)
                                                   : rs->b.alloc_private(&rs->b, n);
            rs->snap[i] = rs->b.alloc_private(&rs->b, n);
        }
        if (in)
            rs->pristine[i] = rs->b.alloc_private(&rs->b, n);
        if ((out && (!rs->ref_out[i] || !rs->snap[i])) || (in && !rs->pristine[i]))
            return rn_fail(st, "out of memory for private buffers");
    }
    return setup_samples(rs, st);
}

/* Fresh inputs of `key` in `slot`, pristine copies, poisoned outputs. */
int rn_fill_slot(rank_state *rs, int slot, int key, rank_step *st) {
    rs->b.use_timed_stream(&rs->b, 0);
    int rc = 0;
    for (int i = 0; i < rs->p->n_args && !rc; i++) {
        const pk_arg_spec *a = &rs->p->args[i];
        if (a->role == PK_ARG_OUTPUT)
            rc = rs->b.poison(&rs->b, rn_arg_ptr(rs, slot, i), a->dtype, rs->sz.counts[i]) ||
                 rs->b.poison(&rs->b, rs->ref_out[i], a->dtype, rs->sz.counts[i]);
    }
    if (!rc)
        rc = rn_generate_inputs(rs, slot, key);
    if (!rc)
        rc = rs->b.sync(&rs->b);
    for (int i = 0; i < rs->p->n_args && !rc; i++) {
        const pk_arg_spec *a = &rs->p->args[i];
        if (a->role == PK_ARG_OUTPUT)
            continue;
        rc = rs->b.copy(&rs->b, rs->pristine[i], rn_arg_ptr(rs, slot, i), rs->lay.arg_bytes[i]);
        if (!rc && a->role == PK_ARG_INOUT)
            rc = rs->b.copy(&rs->b, rs->ref_out[i], rn_arg_ptr(rs, slot, i), rs->lay.arg_bytes[i]);
    }
    if (rc || rs->b.sync(&rs->b))
        return rn_fail(st, "input generation failed: %s", rs->b.error);
    return 0;
}

int rn_check_guards(rank_state *rs, rank_step *st) {
    rn_guard_hit hit;
    rs->b.use_timed_stream(&rs->b, 0);
    if (rs->b.check_guards(&rs->b, rs->ctx.sym_base, rs->zones_dev, rs->lay.n_zones,
                           rs->plan.guard_seed, &hit))
        return rn_fail(st, "guard check failed: %s", rs->b.error);
    if (hit.zone >= 0 && !st->guard_bad) {
        st->guard_bad = 1;
        rn_guard_describe(rs->p, &rs->lay, &hit, rs->ctx.rank, st->guard_detail,
                          sizeof st->guard_detail);
    }
    return 0;
}

/* Compares every checked output of this rank (snapshots) with the reference's. */
static int compare_outputs(rank_state *rs, int slot, rank_step *st) {
    pk_problem_call want, got;
    rn_make_call(rs, slot, 1, &want);
    rn_make_call(rs, slot, 0, &got);
    for (int i = 0; i < rs->p->n_args; i++)
        if (rs->p->args[i].role != PK_ARG_INPUT)
            got.args[i] = rs->snap[i]; /* what the candidate left, snapshotted */
    st->index = -1;
    for (int i = 0; i < rs->p->n_args; i++) {
        const pk_arg_spec *a = &rs->p->args[i];
        if (a->role == PK_ARG_INPUT || a->check == PK_CHECK_NONE ||
            (a->check == PK_CHECK_ROOT && rs->ctx.rank != rs->p->root))
            continue;
        rn_verdict v;
        if (rn_check_output(rs, i, rs->snap[i], rs->ref_out[i], rs->sz.counts[i], &want, &got, &v))
            return rn_fail(st, "%s", rs->b.error);
        st->max_abs = fmax(st->max_abs, v.max_abs);
        st->max_rel = fmax(st->max_rel, v.max_rel);
        if (v.bad && !st->mismatch) {
            st->mismatch = 1;
            snprintf(st->arg, sizeof st->arg, "%s", a->name);
            st->index = v.index;
            st->expected = v.expected;
            st->got = v.got;
        }
    }
    return 0;
}

int rn_check_trial(rank_state *rs, int key, int slot, rank_step *st) {
    double t_fill = pk_now_ms();
    if (rn_fill_slot(rs, slot, key, st))
        return -1;
    double fill_ms = pk_now_ms() - t_fill;
    pk_problem_call c;
    rn_make_call(rs, slot, 0, &c);
    double t_sync = pk_now_ms();
    if (rs->g->barrier(rs->g))
        return rn_fail(st, "rank barrier failed");
    double sync_ms = pk_now_ms() - t_sync;
    int trial = key < RN_KEY_POST_TIMING ? key : -1;
    rn_progress(rs->o->progress_dir, rs->ctx.rank, "candidate", trial);
    double t_cand = pk_now_ms();
    int rc = rn_call_candidate(rs, &c);
    /* Only ctx->stream is waited for: work left on another stream shows up as wrong output. */
    int sync_rc = rs->b.sync_stream ? rs->b.sync_stream(&rs->b, &rs->ctx) : rs->b.sync(&rs->b);
    double calls_ms = pk_now_ms() - t_cand;
    rn_progress(rs->o->progress_dir, rs->ctx.rank, "harness", trial);
    if (rc)
        return rn_fail(st, "%s returned %d on rank %d", rs->p->entry, rc, rs->ctx.rank);
    if (sync_rc)
        return rn_fail(st, "CUDA error after the solution ran: %s", rs->b.error);
    for (int i = 0; i < rs->p->n_args; i++) {
        const pk_arg_spec *a = &rs->p->args[i];
        if (a->role != PK_ARG_INPUT &&
            rs->b.copy(&rs->b, rs->snap[i], c.args[i], rs->lay.arg_bytes[i]))
            return rn_fail(st, "%s", rs->b.error);
    }
    for (int i = 0; i < rs->p->n_args; i++) {
        if (rs->p->args[i].role != PK_ARG_INPUT)
            continue;
        int eq = 1;
        if (rs->b.equal(&rs->b, c.args[i], rs->pristine[i], rs->lay.arg_bytes[i], &eq))
            return rn_fail(st, "%s", rs->b.error);
        if (!eq) {
            st->inputs_modified = 1;
            rs->b.copy(&rs->b, c.args[i], rs->pristine[i], rs->lay.arg_bytes[i]);
        }
    }
    pk_problem_call rc_call;
    rn_make_call(rs, slot, 1, &rc_call);
    rn_progress(rs->o->progress_dir, rs->ctx.rank, "reference", trial);
    double t_ref = pk_now_ms();
    if (rs->mod->reference(&rc_call) || rs->b.sync(&rs->b))
        return rn_fail(st, "the reference failed: %s", rs->b.error);
    calls_ms += pk_now_ms() - t_ref;
    if (trial >= 0)
        rn_pace_add(&rs->pace, trial == 0, fill_ms, calls_ms, sync_ms);
    rn_progress(rs->o->progress_dir, rs->ctx.rank, "harness", trial);
    if (compare_outputs(rs, slot, st))
        return -1;
    if (rs->o->dump_dir && trial >= 0 && rn_dump_trial(rs, trial, slot, st))
        return -1;
    return rn_check_guards(rs, st);
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

/* The first rank's guard violation, if any rank saw one; returns 1 then. */
static int record_guards(rank_state *rs, const rank_step *all, rn_report *rep) {
    for (int r = 0; r < rs->g->world; r++)
        if (all[r].guard_bad) {
            rep->guard_violation = 1;
            snprintf(rep->guard_detail, sizeof rep->guard_detail, "%s", all[r].guard_detail);
            return 1;
        }
    return 0;
}

static void teardown(rank_state *rs) {
    if (rs->fini_fn)
        rs->fini_fn(&rs->ctx);
    if (rs->module_ready && rs->mod->fini)
        rs->mod->fini(&rs->ctx);
    if (rs->b.free_private) {
        for (int i = 0; i < PK_MAX_ARGS; i++) {
            rs->b.free_private(&rs->b, rs->ref_out[i]);
            rs->b.free_private(&rs->b, rs->pristine[i]);
            rs->b.free_private(&rs->b, rs->snap[i]);
            rs->b.free_private(&rs->b, rs->pos[i]);
        }
        rs->b.free_private(&rs->b, rs->snaps);
        rs->b.free_private(&rs->b, rs->discard);
        rs->b.free_private(&rs->b, rs->check_buf);
        rs->b.free_private(&rs->b, rs->zones_dev);
    }
    if (rs->b.fini)
        rs->b.fini(&rs->b, &rs->ctx);
}

/* Exchanges the step of the phase that just ran and reports the first failure into rep;
 * returns 1 to stop. */
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

/* Device, module, arena; warm mode waits for go here. Returns 1 when the run must stop. */
static int set_up(rank_state *rs, rank_step *st, rn_report *rep, rank_step *all, double *t0) {
    /* --lock-setup (the harness's default): the CUDA context, the communicator, the arena and
     * the buffers are made under the GPU locks held shared, so that no other job's timing
     * overlaps them: a context's creation disturbed co-resident timing (up to 1.78x on a
     * reference timed against itself, bench/results/gpu-pass-2026-11-23b-h200x2.md). */
    int lock = rs->o->lock_setup ? RN_LOCK_SETUP : RN_LOCK_NONE;
    /* --rank-visibility own: this process sees only its GPU, as device 0 (visible.c). */
    int device = rs->o->rank_visibility_own ? 0 : rs->g->rank;
    int locked = rn_gpu_phase_begin(rs, lock, st) == 0;
    int init_rc = !locked             ? -1
                  : rs->p->device_gpu ? rn_backend_gpu_init(&rs->b, &rs->ctx, rs->g, device)
                                      : rn_backend_host_init(&rs->b, &rs->ctx);
    st->init_ms = pk_now_ms() - *t0;
    double t_arena = pk_now_ms();
    if (locked && !init_rc && rs->o->fake_setup_failure)
        init_rc = snprintf(rs->b.error, sizeof rs->b.error,
                           "faked for a test (PKGYM_FAKE_SETUP_FAILURE in the server's "
                           "environment)");
    if (locked && init_rc)
        rn_fail(st, "device setup failed: %s", rs->b.error);
    else if (locked && !load_module(rs, st) && !setup_buffers(rs, st))
        init_module(rs, st); /* each failure above marked st failed: the exchange sees it */
    rn_gpu_phase_end(rs);
    st->arena_ms = pk_now_ms() - t_arena;
    if (rs->o->wait_go) { /* warm: everything above overlaps the compile */
        rn_progress(rs->o->progress_dir, rs->ctx.rank, "warm", -1);
        if (!rn_wait_go(rs->o->progress_dir)) {
            rep->aborted = 1;
            return 1;
        }
        rn_progress(rs->o->progress_dir, rs->ctx.rank, "setup", -1);
        *t0 = pk_now_ms(); /* setup is counted from go */
    }
    /* The line between our failures and the candidate's: every rank's set-up is known good
     * before any rank loads candidate code, and the marker says so in a channel the
     * candidate cannot take back (pk_runner_exit.h). */
    snprintf(rep->gpu_name, sizeof rep->gpu_name, "%s", rs->b.name);
    if (phase_failed(rs, st, rep, all)) {
        rep->infra = 1;
        return 1;
    }
    if (!rs->o->reference_as_candidate)
        rn_setup_done_marker();
    if (!load_candidate(rs, st) && rs->init_fn) {
        rn_progress(rs->o->progress_dir, rs->ctx.rank, "candidate", -1);
        if (rs->init_fn(&rs->ctx))
            rn_fail(st, "solution_init failed");
        rn_progress(rs->o->progress_dir, rs->ctx.rank, "harness", -1);
    }
    if (phase_failed(rs, st, rep, all))
        return 1;
    for (int r = 0; r < rs->g->world; r++) {
        rep->init_ms = fmax(rep->init_ms, all[r].init_ms);
        rep->arena_ms = fmax(rep->arena_ms, all[r].arena_ms);
    }
    return 0;
}

/* The correctness trials; returns 1 when all passed and no guard was touched. */
static int run_trials(rank_state *rs, rn_report *rep, rank_step *all) {
    rep->trials_planned = rs->plan.trials;
    for (int trial = 0; trial < rs->plan.trials; trial++) {
        rank_step st = {0};
        if (rn_gpu_phase_begin(rs, RN_LOCK_SHARED, &st) == 0)
            rn_check_trial(rs, trial, rs->plan.trial_slot[trial], &st);
        rn_gpu_phase_end(rs);
        if (phase_failed(rs, &st, rep, all))
            return 0;
        record_trial(rs, all, rep);
        if (record_guards(rs, all, rep) || !rep->trials[rep->n_trials - 1].passed)
            return 0;
    }
    return 1;
}

/* Timing, then one fresh call verified after it, then the guards once more. */
static void run_timing(rank_state *rs, rn_report *rep, rank_step *all) {
    double t0 = pk_now_ms();
    rank_step st = {0};
    /* Every rank's pace: rank 0 waits for the slowest at each block's end. */
    static rn_pace paces[PK_MAX_RANKS];
    rn_pace worst = rs->pace;
    if (rs->g->allgather(rs->g, &rs->pace, paces, sizeof rs->pace) == 0) {
        for (int r = 0; r < rs->g->world; r++)
            rn_pace_max(&worst, &paces[r]);
        rep->timing_expect_ms =
            rn_timing_expect_ms(&rs->plan, &worst, rs->o->skip_reference_timing ? 1 : 2,
                                rs->lay.copies, rs->p->warmup_ms);
    }
    rn_gpu_phase_expect(rep->timing_expect_ms);
    double t_hold = 0;
    if (rn_gpu_phase_begin(rs, RN_LOCK_EXCLUSIVE, &st) == 0) {
        t_hold = pk_now_ms();
        rn_time_both(rs, rep, &st);
    }
    rn_gpu_phase_end(rs);
    double t_guard = pk_now_ms();
    rep->timing_hold_ms = t_hold > 0 ? t_guard - t_hold : 0;
    if (!st.failed)
        rn_check_guards(rs, &st);
    st.verify_ms += pk_now_ms() - t_guard;
    if (phase_failed(rs, &st, rep, all))
        return;
    rep->timing_ms = pk_now_ms() - t0;
    rep->timed = 1;
    for (int r = 0; r < rs->g->world; r++) {
        rep->verify_ms = fmax(rep->verify_ms, all[r].verify_ms);
        if (all[r].unsynchronized && !rep->unsynchronized) {
            rep->unsynchronized = 1;
            snprintf(rep->unsync_detail, sizeof rep->unsync_detail, "%s", all[r].msg);
        }
        rep->timed_wrong |= all[r].timed_wrong;
        rep->timed_inputs_modified |= all[r].timed_inputs_modified;
    }
    if (record_guards(rs, all, rep))
        return;
    memset(&st, 0, sizeof st);
    double t_post = pk_now_ms();
    if (rn_gpu_phase_begin(rs, RN_LOCK_SHARED, &st) == 0)
        rn_check_trial(rs, RN_KEY_POST_TIMING, rs->plan.trial_slot[rs->plan.trials], &st);
    rn_gpu_phase_end(rs);
    if (phase_failed(rs, &st, rep, all))
        return;
    rep->verify_ms += pk_now_ms() - t_post; /* rank 0's; every rank waited for the slowest */
    for (int r = 0; r < rs->g->world; r++)
        if (all[r].mismatch || all[r].inputs_modified)
            rep->timed_wrong = 1;
    record_guards(rs, all, rep);
}

/* --profile-call: one warm-up call (module loading, the candidate's first-call set-up), then
 * one call between profile_range(1) and profile_range(0), under the locks held exclusively so
 * that no other job's kernels share the GPUs with it. Its output is checked like a trial's. */
static void run_profile_call(rank_state *rs, rn_report *rep, rank_step *all) {
    rank_step st = {0};
    int slot = rs->plan.trial_slot[rs->plan.trials];
    if (rn_gpu_phase_begin(rs, RN_LOCK_EXCLUSIVE, &st) == 0 &&
        rn_check_trial(rs, RN_KEY_POST_TIMING, slot, &st) == 0 &&
        rn_fill_slot(rs, slot, RN_KEY_POST_TIMING + 1, &st) == 0) {
        pk_problem_call c;
        rn_make_call(rs, slot, 0, &c);
        if (rs->g->barrier(rs->g))
            rn_fail(&st, "rank barrier failed");
        else if (rs->b.profile_range && rs->b.profile_range(&rs->b, 1))
            rn_fail(&st, "%s", rs->b.error);
        else {
            int rc = rn_call_candidate(rs, &c);
            int sync_rc = rs->b.sync(&rs->b);
            if (rs->b.profile_range && rs->b.profile_range(&rs->b, 0) && !rc && !sync_rc)
                rn_fail(&st, "%s", rs->b.error);
            if (rc)
                rn_fail(&st, "%s returned %d on rank %d", rs->p->entry, rc, rs->ctx.rank);
            else if (sync_rc)
                rn_fail(&st, "CUDA error after the solution ran: %s", rs->b.error);
        }
    }
    rn_gpu_phase_end(rs);
    phase_failed(rs, &st, rep, all);
}

static void run_rank(rank_state *rs, rn_report *rep) {
    static rank_step all[PK_MAX_RANKS];
    rank_step st = {0};
    double t0 = pk_now_ms();
    if (set_up(rs, &st, rep, all, &t0))
        return;
    rep->setup_ms = pk_now_ms() - t0;
    t0 = pk_now_ms();
    int all_passed = run_trials(rs, rep, all);
    rep->check_ms = pk_now_ms() - t0;
    if (rep->error[0])
        return;
    rep->ok = 1;
    if (all_passed && !rs->o->skip_timing)
        run_timing(rs, rep, all);
    if (all_passed && rs->o->profile_call)
        run_profile_call(rs, rep, all);
}

/* The secret seed comes in a file the harness wrote, never on the command line, so that it is
 * not among the strings a candidate could find in the process's memory (argv). */
int rn_read_seed(rn_opts *o) {
    if (!o->seed_file)
        return 0;
    FILE *f = fopen(o->seed_file, "r");
    unsigned long long v = 0;
    int ok = f && fscanf(f, "%llu", &v) == 1;
    if (f)
        fclose(f);
    if (!ok)
        return -1;
    o->seed = v;
    return 0;
}

/* Measurements of the profile stage only (PKGYM_PROFILE_RANK_TMPDIR=1, passed by the harness):
 * each rank of a profiled run gets its own TMPDIR before CUDA starts. Nsight Compute serializes
 * kernel profiling across the processes that share its lock file ($TMPDIR/nsight-compute-lock),
 * which makes a kernel that waits for another rank wait forever; whether per-rank lock files
 * are safe is what bench/profile/gpu-profile.sh measures. */
static void rank_tmpdir(const rn_opts *o, int rank) {
    const char *on = getenv("PKGYM_PROFILE_RANK_TMPDIR");
    if (!o->profile_call || !on || strcmp(on, "1") != 0)
        return;
    const char *base = getenv("TMPDIR");
    char dir[512];
    snprintf(dir, sizeof dir, "%s/pk-rank%d", base && *base ? base : "/tmp", rank);
    if (mkdir(dir, 0700) == 0 || errno == EEXIST)
        setenv("TMPDIR", dir, 1);
}

int rn_rank_main(rn_opts *o, rn_group *g) {
    static rank_state rs;
    static rn_report rep;
    rank_tmpdir(o, g->rank);
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
    if (rn_read_seed(o)) {
        fprintf(stderr, "pk-runner: cannot read the seed file\n");
        return PK_RUNNER_EXIT_INFRA;
    }
    /* Every rank has read it: gone before any candidate code is loaded. */
    if (o->seed_file && g->barrier(g) == 0 && g->rank == 0)
        unlink(o->seed_file);
    if (pk_problem_load_dir(o->problem_dir, o->suite, o->name, NULL, &rs.p, &err) ||
        (o->dims && pk_problem_override_dims(rs.p, o->dims, &err)) ||
        pk_problem_sizes_at(rs.p, g->world, &rs.sz, &err)) {
        fprintf(stderr, "pk-runner: %s\n", err.message);
        return PK_RUNNER_EXIT_INFRA;
    }
    if (!rs.p->device_gpu)
        rs.ctx.mpi_comm = rn_group_mpi_comm(g);
    run_rank(&rs, &rep);
    if (!o->teardown && rs.fini_fn) { /* the candidate's fini runs either way, before the result */
        rs.fini_fn(&rs.ctx);
        rs.fini_fn = NULL;
    }
    if (o->teardown) { /* measured: freed before the result is written */
        double t_down = pk_now_ms();
        teardown(&rs);
        rep.teardown_ms = pk_now_ms() - t_down;
    }
    rep.lock_wait_ms = rn_gpu_lock_wait_ms();
    int rc = rep.infra ? PK_RUNNER_EXIT_INFRA : 0;
    if (g->rank == 0 && !rep.aborted && rn_report_write(o->out, &rep)) {
        fprintf(stderr, "pk-runner: cannot write %s\n", o->out);
        rc = rep.infra ? PK_RUNNER_EXIT_INFRA : PK_RUNNER_EXIT_RESULT;
    }
    /* Fast exit (default): the process exits with the result written and everything still
     * allocated; the driver frees device memory, communicators and windows at exit, and the
     * sandbox reaps every process before the harness reads the result. */
    rn_progress(o->progress_dir, g->rank, "done", -1);
    pk_problem_free(rs.p);
    return rc;
}
