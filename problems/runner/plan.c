/* The secret plan of one step. Everything a candidate could use to tell a checked call from
 * an unchecked one is drawn here from the step's secret seed: the number of trials, warm-up
 * and timed calls, the slot every call uses, and which timed calls are verified. Every rank
 * derives the same plan, so collective calls stay matched. */
#include "pk_runner.h"

#include <string.h>

typedef struct rng {
    uint64_t state;
} rng;

static uint64_t next(rng *r) {
    r->state += 0x9e3779b97f4a7c15ULL;
    return pk_splitmix64(r->state);
}

static int below(rng *r, int n) { /* uniform in [0, n) */
    return n > 0 ? (int)(next(r) % (uint64_t)n) : 0;
}

/* n slots as concatenated random permutations of [0, copies), never the same slot twice in a
 * row (so a call's data is never still in L2 from the previous call). */
static void slot_order(rng *r, int copies, int n, unsigned char *out) {
    unsigned char perm[RN_MAX_COPIES];
    int filled = 0, last = -1;
    while (filled < n) {
        for (int i = 0; i < copies; i++)
            perm[i] = (unsigned char)i;
        for (int i = copies - 1; i > 0; i--) {
            int j = below(r, i + 1);
            unsigned char t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
        }
        if (copies > 1 && perm[0] == last) {
            int j = 1 + below(r, copies - 1);
            unsigned char t = perm[0];
            perm[0] = perm[j];
            perm[j] = t;
        }
        for (int i = 0; i < copies && filled < n; i++)
            out[filled++] = perm[i];
        last = out[filled - 1];
    }
}

/* base x [0.875, 1.125]: secret, and on average as many calls as asked for. */
static int jitter(rng *r, int base, int cap) {
    int v = base - base / 8 + below(r, 2 * (base / 8) + 1);
    v = v < 1 ? 1 : v;
    return v > cap ? cap : v;
}

static void plan_block(rng *r, int copies, int n, int verify, rn_block_plan *b) {
    memset(b, 0, sizeof *b);
    b->n = n;
    slot_order(r, copies, n, b->slot);
    for (int i = 0; i < n; i++)
        b->verify[i] = -1;
    if (!verify)
        return;
    /* The last call on every slot first, then each other call with probability 1/4. */
    int seen[RN_MAX_COPIES] = {0};
    for (int i = n - 1; i >= 0; i--)
        if (!seen[b->slot[i]]) {
            seen[b->slot[i]] = 1;
            b->verify[i] = 0;
        }
    for (int i = 0; i < n; i++)
        if (b->verify[i] < 0 && below(r, 4) == 0)
            b->verify[i] = 0;
    for (int i = 0; i < n; i++) {
        if (b->verify[i] < 0)
            continue;
        if (b->n_verified == RN_MAX_VERIFIED)
            b->verify[i] = -1;
        else
            b->verify[i] = (short)b->n_verified++;
    }
}

void rn_plan_make(uint64_t seed, int base_trials, int warmup_iters, int iters, int blocks,
                  int copies, rn_plan *out) {
    rng r = {rn_secret(seed, 0x706c616e)}; /* "plan" */
    memset(out, 0, sizeof *out);
    out->trials = base_trials + below(&r, 3);
    if (out->trials > PK_EVAL_MAX_TRIALS)
        out->trials = PK_EVAL_MAX_TRIALS;
    for (int t = 0; t <= out->trials; t++)
        out->trial_slot[t] = (unsigned char)below(&r, copies);
    out->warmup_iters = warmup_iters ? jitter(&r, warmup_iters, RN_MAX_WARM_ITERS) : 0;
    slot_order(&r, copies, out->warmup_iters, out->warm_slot);
    int total = jitter(&r, iters, RN_MAX_TIMED_ITERS);
    blocks = blocks < 1 ? 1 : blocks > PK_MAX_TIMING_BLOCKS ? PK_MAX_TIMING_BLOCKS : blocks;
    if (blocks > total)
        blocks = total;
    out->blocks = blocks;
    /* The split between blocks is secret too: even shares, then each boundary moved by up to
     * a quarter of a share either way (every block keeps at least one call). */
    int size[PK_MAX_TIMING_BLOCKS];
    for (int b = 0; b < blocks; b++)
        size[b] = total / blocks + (b < total % blocks);
    for (int b = 0; b + 1 < blocks; b++) {
        int d = size[b] / 4 - below(&r, size[b] / 2 + 1);
        if (size[b] - d >= 1 && size[b + 1] + d >= 1) {
            size[b] -= d;
            size[b + 1] += d;
        }
    }
    for (int who = 0; who < 2; who++)
        for (int blk = 0; blk < blocks; blk++)
            plan_block(&r, copies, size[blk], who == 0, &out->block[who][blk]);
    out->guard_seed = rn_secret(seed, 0x6775617264); /* "guard" */
    out->sample_key = rn_secret(seed, 0x73616d706c); /* "sampl" */
}

void rn_pace_add(rn_pace *p, int first, double fill_ms, double calls_ms, double sync_ms) {
    if (first) {
        p->first_fill_ms = fill_ms;
        p->first_calls_ms = calls_ms;
        p->first_sync_ms = sync_ms;
        return;
    }
    p->fill_ms = fill_ms > p->fill_ms ? fill_ms : p->fill_ms;
    p->calls_ms = calls_ms > p->calls_ms ? calls_ms : p->calls_ms;
    p->sync_ms = sync_ms > p->sync_ms ? sync_ms : p->sync_ms;
    p->later++;
}

void rn_pace_max(rn_pace *into, const rn_pace *o) {
#define PK_PACE_MAX(f) into->f = o->f > into->f ? o->f : into->f
    PK_PACE_MAX(first_fill_ms);
    PK_PACE_MAX(first_calls_ms);
    PK_PACE_MAX(first_sync_ms);
    PK_PACE_MAX(fill_ms);
    PK_PACE_MAX(calls_ms);
    PK_PACE_MAX(sync_ms);
    PK_PACE_MAX(later);
#undef PK_PACE_MAX
}

#define WARM_CHUNK 16 /* timing.c's warm-up chunk, each after a rank broadcast */

double rn_timing_expect_ms(const rn_plan *plan, const rn_pace *pace, int n_sides, int copies,
                           double warmup_ms) {
    double fill = pace->later ? pace->fill_ms : pace->first_fill_ms;
    double calls = pace->later ? pace->calls_ms : pace->first_calls_ms;
    double sync = pace->later ? pace->sync_ms : pace->first_sync_ms;
    if (fill + calls <= 0)
        return 0;
    double per_call = fill + calls, ms = 0;
    for (int who = 0; who < n_sides; who++) {
        /* Warm-up: its calls, or its time cap plus a chunk begun just before the cap. */
        double warm = plan->warmup_iters * per_call, capped = warmup_ms + WARM_CHUNK * per_call;
        int chunks = (plan->warmup_iters + WARM_CHUNK - 1) / WARM_CHUNK + 1;
        ms += copies * fill + (warm < capped ? warm : capped) + chunks * sync + sync;
        for (int b = 0; b < plan->blocks; b++) {
            const rn_block_plan *bp = &plan->block[who][b];
            /* its calls, its lead-in and, for the candidate, its verified calls */
            ms += copies * fill + sync + (bp->n + 1 + (who == 0 ? bp->n_verified : 0)) * per_call;
        }
    }
    return ms;
}
