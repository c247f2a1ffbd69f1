/* Timing of the candidate and the reference, and the verification of timed calls.
 *
 * Each side gets a warm-up and the plan's timed blocks (timing.blocks, default 2), interleaved
 * (candidate, reference, candidate, reference; beyond 2 blocks C R R C C R ...), each after a
 * rank barrier and one untimed lead-in call of the same side: the first call after the barrier
 * found the GPUs idle and the ranks released apart, and ran 6-39% slower than the rest (the
 * all-reduce's per-call CV 1-5% with it, 0.5-0.9% without; bench/results/gpu-pass-2026-11-23c-
 * h200x2.md). Every call is timed alone by CUDA events
 * on ctx->stream and followed by an untimed epilogue that is the same for every call: the
 * samples of every argument are copied out (a verified call's into its snapshot, any other's
 * into a discard buffer), the slot gets fresh inputs (so no call sees the inputs of an earlier
 * one: replaying a result is wrong), and the L2 is evicted. After a candidate block, the
 * verified calls' inputs are regenerated, the reference runs on them, and the snapshots are
 * compared with it. Which calls are verified, how many calls there are and the slot order are
 * secret (plan.c). */
#include "pk_runner.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct timed_ctx {
    rank_state *rs;
    int reference;
    const unsigned char *slot;
    const short *verify; /* NULL: nothing verified (warm-up, reference) */
} timed_ctx;

static int timed_call(void *arg, int i) {
    timed_ctx *t = arg;
    pk_problem_call c;
    rn_make_call(t->rs, t->slot[i], 0, &c);
    return t->reference ? t->rs->mod->reference(&c) : rn_call_candidate(t->rs, &c);
}

static int epilogue(void *arg, int i) {
    timed_ctx *t = arg;
    rank_state *rs = t->rs;
    int s = t->slot[i], j = t->verify ? t->verify[i] : -1;
    char *dst = j >= 0 ? (char *)rs->snaps + (size_t)j * rs->sample_bytes : rs->discard;
    if (j >= 0) {
        rs->verified_key[j] = rs->slot_key[s];
        rs->verified_slot[j] = (unsigned char)s;
    }
    for (int a = 0; a < rs->p->n_args; a++)
        if (rs->b.gather(&rs->b, dst + rs->sample_off[a], rn_arg_ptr(rs, s, a),
                         pk_dtype_size(rs->p->args[a].dtype), rs->pos[a], rs->n_samples[a]))
            return -1;
    if (rn_generate_inputs(rs, s, rs->next_key++))
        return -1;
    return rs->b.flush_l2(&rs->b);
}

/* Fresh inputs and poisoned outputs in every slot, on the harness stream. */
static int fill_all_slots(rank_state *rs, rank_step *st) {
    rs->b.use_timed_stream(&rs->b, 0);
    for (int s = 0; s < rs->lay.copies; s++) {
        if (rn_generate_inputs(rs, s, rs->next_key++))
            return rn_fail(st, "input generation failed: %s", rs->b.error);
        for (int i = 0; i < rs->p->n_args; i++)
            if (rs->p->args[i].role == PK_ARG_OUTPUT &&
                rs->b.poison(&rs->b, rn_arg_ptr(rs, s, i), rs->p->args[i].dtype, rs->sz.counts[i]))
                return rn_fail(st, "poisoning failed: %s", rs->b.error);
    }
    if (rs->b.sync(&rs->b))
        return rn_fail(st, "input generation failed: %s", rs->b.error);
    return 0;
}

/* Runs calls [0, n) of a schedule with epilogues on ctx->stream. */
static int run_calls(rank_state *rs, timed_ctx *t, int n, double *us, double *host,
                     double *stream) {
    rs->b.use_timed_stream(&rs->b, 1);
    int rc = rs->b.time_calls(&rs->b, timed_call, epilogue, t, n, us, host, stream);
    rs->b.use_timed_stream(&rs->b, 0);
    return rc;
}

/* Warm-up bounded by count and time; rank 0 decides when to stop so all ranks agree. */
static int warm_up(rank_state *rs, int reference, int *done_iters, rank_step *st) {
    static double scratch[16];
    double start = pk_now_ms(), host, stream;
    const int want = rs->plan.warmup_iters;
    int done = 0;
    if (fill_all_slots(rs, st))
        return -1;
    for (;;) {
        int stop = done >= want || pk_now_ms() - start >= rs->p->warmup_ms;
        if (rn_group_broadcast(rs->g, &stop, sizeof stop, 0))
            return rn_fail(st, "rank broadcast failed");
        if (stop)
            break;
        int chunk = want - done < 16 ? want - done : 16;
        timed_ctx t = {rs, reference, rs->plan.warm_slot + done, NULL};
        if (!done) /* a hang in the warm-up names the side */
            rn_progress(rs->o->progress_dir, rs->ctx.rank, reference ? "reference" : "candidate",
                        -1);
        if (run_calls(rs, &t, chunk, scratch, &host, &stream))
            return rn_fail(st, "warm-up failed: %s", rs->b.error);
        done += chunk;
    }
    if (done)
        rn_progress(rs->o->progress_dir, rs->ctx.rank, "harness", -1);
    *done_iters = done;
    return 0;
}

/* Compares the samples of verified call j with the reference on the same inputs. */
static int verify_call(rank_state *rs, int j, rank_step *st) {
    int s = rs->verified_slot[j];
    if (rn_generate_inputs(rs, s, rs->verified_key[j]) || rs->b.sync(&rs->b))
        return rn_fail(st, "input regeneration failed: %s", rs->b.error);
    for (int i = 0; i < rs->p->n_args; i++)
        if (rs->p->args[i].role == PK_ARG_INOUT &&
            rs->b.copy(&rs->b, rs->ref_out[i], rn_arg_ptr(rs, s, i), rs->lay.arg_bytes[i]))
            return rn_fail(st, "%s", rs->b.error);
    pk_problem_call c;
    rn_make_call(rs, s, 1, &c);
    if (rs->mod->reference(&c) || rs->b.sync(&rs->b))
        return rn_fail(st, "the reference failed: %s", rs->b.error);
    const char *snap = (const char *)rs->snaps + (size_t)j * rs->sample_bytes;
    char *mine = rs->check_buf;
    pk_problem_call got; /* for check(): the inputs in the slot, the outputs the snapshot */
    rn_make_call(rs, s, 0, &got);
    for (int i = 0; i < rs->p->n_args; i++)
        if (rs->p->args[i].role != PK_ARG_INPUT)
            got.args[i] = (void *)(snap + rs->sample_off[i]);
    for (int i = 0; i < rs->p->n_args; i++) {
        const pk_arg_spec *a = &rs->p->args[i];
        size_t off = rs->sample_off[i], n = rs->n_samples[i], es = pk_dtype_size(a->dtype);
        int input = a->role == PK_ARG_INPUT;
        if (!input && (a->check == PK_CHECK_NONE ||
                       (a->check == PK_CHECK_ROOT && rs->ctx.rank != rs->p->root)))
            continue;
        if (rs->b.gather(&rs->b, mine + off, input ? rn_arg_ptr(rs, s, i) : rs->ref_out[i], es,
                         rs->pos[i], n) ||
            rs->b.sync(&rs->b))
            return rn_fail(st, "%s", rs->b.error);
        if (input) {
            int eq = 1;
            if (rs->b.equal(&rs->b, snap + off, mine + off, n * es, &eq))
                return rn_fail(st, "%s", rs->b.error);
            st->timed_inputs_modified |= !eq;
        } else {
            rn_verdict v;
            if (rn_check_output(rs, i, snap + off, mine + off, n, &c, &got, &v))
                return rn_fail(st, "%s", rs->b.error);
            st->timed_wrong |= v.bad;
        }
    }
    return 0;
}

static int run_block(rank_state *rs, int reference, const rn_block_plan *bp, double *us,
                     double *host, double *stream, rank_step *st) {
    if (fill_all_slots(rs, st))
        return -1;
    if (rs->g->barrier(rs->g))
        return rn_fail(st, "rank barrier failed");
    rn_progress(rs->o->progress_dir, rs->ctx.rank, reference ? "reference" : "candidate", -1);
    /* The lead-in goes first in the same run of calls (time_calls waits for the device before
     * it starts), on another slot than the block's first call; its epilogue refreshes that
     * slot like any other, and its time is dropped. */
    static unsigned char slots[RN_MAX_RUN_CALLS];
    static short verify[RN_MAX_RUN_CALLS];
    static double times[RN_MAX_RUN_CALLS];
    slots[0] = (unsigned char)((bp->slot[0] + 1) % rs->lay.copies);
    verify[0] = -1;
    memcpy(slots + 1, bp->slot, (size_t)bp->n);
    for (int i = 0; i < bp->n; i++)
        verify[i + 1] = reference ? -1 : bp->verify[i];
    timed_ctx t = {rs, reference, slots, verify};
    if (run_calls(rs, &t, bp->n + 1, times, host, stream))
        return rn_fail(st, "timing failed: %s", rs->b.error);
    memcpy(us, times + 1, sizeof *us * (size_t)bp->n);
    rn_progress(rs->o->progress_dir, rs->ctx.rank, "harness", -1);
    /* The epilogues' share of the loop (and the lead-in): the stream's time beyond the timed
     * calls themselves. */
    double calls = 0;
    for (int i = 0; i < bp->n; i++)
        calls += us[i];
    st->verify_ms += (*stream - calls) / 1e3;
    double t0 = pk_now_ms();
    for (int j = 0; !reference && j < bp->n_verified; j++)
        if (verify_call(rs, j, st))
            return -1;
    st->verify_ms += pk_now_ms() - t0;
    return 0;
}

int rn_time_both(rank_state *rs, rn_report *rep, rank_step *st) {
    static double mine[2][RN_MAX_TIMED_ITERS], all[PK_MAX_RANKS * RN_MAX_TIMED_ITERS];
    double host_total[2] = {0, 0}, stream_total[2] = {0, 0};
    int warm[2] = {0, 0}, filled[2] = {0, 0};
    const int n_who = rs->o->skip_reference_timing ? 1 : 2;
    rs->next_key = RN_KEY_TIMED_BASE;
    for (int who = 0; who < n_who; who++)
        if (warm_up(rs, who, &warm[who], st))
            return -1;
    for (int blk = 0; blk < rs->plan.blocks; blk++)
        for (int k = 0; k < n_who; k++) {
            /* Beyond 2 blocks the side that goes first alternates (C R R C C R ...), so that
             * a drift over the phase weighs on both sides alike. */
            const int who = n_who == 2 && rs->plan.blocks > 2 && blk % 2 ? 1 - k : k;
            const rn_block_plan *bp = &rs->plan.block[who][blk];
            double host = 0, stream = 0;
            if (bp->n == 0)
                continue;
            if (run_block(rs, who, bp, mine[who] + filled[who], &host, &stream, st))
                return -1;
            filled[who] += bp->n;
            host_total[who] += host;
            stream_total[who] += stream;
            if (!who)
                rep->verified_calls += bp->n_verified;
        }
    const int iters = filled[0];
    /* Work outside the timed stream: the host saw the loop take much longer than the stream. */
    if (rs->b.gpu && host_total[0] > 1.5 * stream_total[0] + 50.0 * iters) {
        st->unsynchronized = 1;
        snprintf(st->msg, sizeof st->msg,
                 "rank %d: timed loop took %.0f us by host clock but %.0f us on ctx->stream",
                 rs->ctx.rank, host_total[0], stream_total[0]);
    }
    pk_timing *out[2] = {&rep->candidate, &rep->reference};
    for (int who = 0; who < n_who; who++) {
        if (rs->g->allgather(rs->g, mine[who], all, sizeof(double) * (size_t)iters))
            return rn_fail(st, "rank gather failed");
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
