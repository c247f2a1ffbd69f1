/* Input regimes of one call (docs/problems.md, "Input regimes"): which regime each argument
 * draws for a call key, and its parameters, all derived from the step's secret seed.
 *
 * Trials take their argument's allowed regimes in a rotation that starts at a secret place, so
 * a step's trials (5 or more; 5 regimes by default) see every regime; the call checked after
 * timing draws one; timing (warm-up, timed and verified calls, both sides) uses one regime for
 * the whole step, drawn secretly, so that both sides are timed on the same kind of data. */
#include "pk_runner.h"

#include <math.h>

/* rn_regime_apply (rn_values.h) numbers the regimes as pk_regime does. */
_Static_assert(PK_REGIME_RANK == 1 && PK_REGIME_ROW == 2 && PK_REGIME_HEAVY == 3 &&
                   PK_REGIME_PEAKED == 4 && PK_REGIME_CANCEL == 5,
               "rn_regime_apply's cases follow pk_regime");

static double unit_of(uint64_t base, uint64_t salt) {
    return pk_splitmix_unit(pk_splitmix64(base ^ pk_splitmix64(salt)));
}

int rn_regime_of(const rank_state *rs, int key, int arg) {
    unsigned set = rs->p->args[arg].gen.regimes;
    int allowed[PK_REGIME_COUNT], n = 0;
    for (int r = 0; r < PK_REGIME_COUNT; r++)
        if (set & (1u << r))
            allowed[n++] = r;
    if (n == 0)
        return PK_REGIME_IID;
    if (rs->o->regime >= 0) /* --regime: forced where allowed (calibration, PKB's cross-check) */
        return set & (1u << rs->o->regime) ? rs->o->regime : allowed[0];
    uint64_t pick;
    if (key < RN_KEY_POST_TIMING)
        pick = rn_secret(rs->o->seed, 0x726f74) + (uint64_t)key; /* "rot" */
    else if (key < RN_KEY_TIMED_BASE)
        pick = rn_secret(rs->o->seed, 0x706f7374); /* "post" */
    else
        pick = rn_secret(rs->o->seed, 0x74696d65); /* "time" */
    return allowed[pick % (uint64_t)n];
}

/* Rank r's scale exponent: the ranks take the W levels of [-4, 4] in a secret order, each
 * jittered within the middle half of its level, so any two ranks' exponents differ by at least
 * 4/W (halved by the callers: 2^(2/W) apart in scale). */
static double rank_exponent(uint64_t base, int rank, int world) {
    uint64_t mine = pk_splitmix64(base + 101 + (uint64_t)rank);
    int pos = 0;
    for (int q = 0; q < world; q++) {
        uint64_t h = pk_splitmix64(base + 101 + (uint64_t)q);
        pos += h < mine || (h == mine && q < rank);
    }
    return -4.0 + 8.0 * (pos + 0.25 + 0.5 * unit_of(base, 202 + (uint64_t)rank)) / world;
}

void rn_gen_for_call(const rank_state *rs, int key, int arg, rn_gen *g) {
    *g = rs->gen[arg];
    g->regime = rn_regime_of(rs, key, arg);
    if (g->regime == PK_REGIME_IID)
        return;
    /* Replicated arguments are one draw for every rank: rank 0's regime too. */
    int rank = rs->p->args[arg].gen.scope == PK_GEN_REPLICATED ? 0 : rs->ctx.rank;
    uint64_t base = pk_splitmix64(rn_secret(rs->o->seed, 0x7265676d) /* "regm" */ ^
                                  pk_splitmix64((uint64_t)key << 8 | (uint64_t)arg));
    uint64_t mine = pk_splitmix64(base + 0x100 + (uint64_t)rank);
    double spread = g->kind == PK_GEN_NORMAL ? g->b : g->b - g->a;
    g->shift_ok = g->kind == PK_GEN_NORMAL;
    g->row_len = rs->sz.row_len[arg] > 0 ? (uint64_t)rs->sz.row_len[arg] : 1;
    g->rkey = pk_splitmix64(mine + 1);
    g->ckey = pk_splitmix64(mine + 2);
    /* Rows of the whole tensor: a sharded argument's element indices are global. */
    const pk_gen_scope scope = rs->p->args[arg].gen.scope;
    g->n_rows =
        (uint64_t)rs->sz.counts[arg] * (scope == PK_GEN_SHARDED ? rs->g->world : 1) / g->row_len;
    /* No fixed norm, and no rank's shard standing for another's in any regime: each rank's
     * scale is drawn per call, 2^-2..2^2, ranks at least 2^(2/W) apart. */
    g->scale = exp2(rank_exponent(base, rank, rs->g->world) / 2);
    /* row, heavy, peaked: the ramp climbs 2 to 4 octaves over the rows and over the columns,
     * up or down */
    g->ramp_r = (2.0 + 2.0 * unit_of(mine, 11)) * (unit_of(mine, 12) < 0.5 ? -1 : 1);
    g->ramp_c = (2.0 + 2.0 * unit_of(mine, 13)) * (unit_of(mine, 14) < 0.5 ? -1 : 1);
    switch (g->regime) {
    case PK_REGIME_RANK: /* small: every rank 2^-8..2^-2 (ranks 2^(2/W) apart), so no value
                            reaches a threshold fixed for N(0, 1) data; the others reach 2^4 */
        g->scale =
            exp2(rank_exponent(base, rank, rs->g->world) / 2 - 6.0 + 2.0 * unit_of(base, 15));
        g->shift = g->scale * spread * (4.0 * unit_of(mine, 4) - 2.0);
        break;
    case PK_REGIME_HEAVY:
        g->p = pow(10.0, -6.0 + 4.0 * unit_of(mine, 5)); /* 1e-6..1e-2 of the elements */
        g->amp = exp2(4.0 + 2.0 * unit_of(mine, 6));     /* 16..64 times larger */
        break;
    case PK_REGIME_PEAKED: /* 1 to 4 peaks per row, 6 to 12 spreads high */
        g->p = (1.0 + 3.0 * unit_of(base, 7)) / (double)g->row_len;
        g->amp = g->scale * spread * (6.0 + 6.0 * unit_of(mine, 8));
        break;
    case PK_REGIME_CANCEL: /* the same terms on every rank, opposite on odd ranks */
        g->scale = 1;
        g->shift = rank & 1 ? -1.0 : 1.0;
        g->amp = spread * exp2(2.0 + 4.0 * unit_of(base, 9));
        g->ckey = pk_splitmix64(base + 10);
        break;
    default:
        break;
    }
}
