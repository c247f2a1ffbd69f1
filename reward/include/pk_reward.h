/* pk_reward: per-turn scores, discounted returns, GRPO advantages, and the CLI entry points.
 *
 * Every score is recomputable from stored facts (the pk_eval_result JSON of a turn) and a
 * pk_reward_config, so reward ablations need no GPU. See docs/rewards.md.
 */
#ifndef PK_REWARD_H
#define PK_REWARD_H

#include "pk_common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum pk_return_mode { PK_RETURN_SUM = 0, PK_RETURN_MAX } pk_return_mode;
typedef enum pk_speedup_transform {
    PK_SPEEDUP_RAW = 0,
    PK_SPEEDUP_LOG2,
    PK_SPEEDUP_CLIP
} pk_speedup_transform;

typedef struct pk_reward_config {
    double gamma;                            /* 0.4 */
    pk_return_mode mode;                     /* sum */
    double w_correct;                        /* 0.3 */
    pk_speedup_transform transform;          /* raw */
    double clip_lo, clip_hi;                 /* for PK_SPEEDUP_CLIP */
    double r_compile, r_run;                 /* intermediate rewards, 0 = off (default) */
    double penalty_rejected, penalty_format; /* subtracted, 0 = off (default) */
    char baseline[32];                       /* "reference" (measured this step) or "roofline" */
} pk_reward_config;

/* Kevin's defaults: sum returns, gamma 0.4, w_correct 0.3, raw speedup, no extras. */
void pk_reward_config_default(pk_reward_config *c);
/* Merges a JSON object (keys: gamma, mode "sum"|"max", w_correct, transform
 * "raw"|"log2"|"clip", clip_lo, clip_hi, r_compile, r_run, penalty_rejected, penalty_format,
 * baseline) over *c. Unknown key, wrong type or out-of-range value -> PK_ERR_INVALID naming
 * it; *c is unchanged on error. */
int pk_reward_config_merge_json(pk_reward_config *c, const char *json, pk_error *err);
/* The config as a JSON object with every key (malloc'd; NULL only when out of memory). */
char *pk_reward_config_to_json(const pk_reward_config *c);
/* Like pk_reward_config_merge_json, but json may also be shaped as the settings users copy
 * (`pkgym reward --config`): {"reward": {...}, ...} as in reset's options, info.settings and the
 * stored episode config. Then only "reward" is read; the other top-level keys must be settings
 * keys (feedback, check, stop_on_correct, max_turns, seed, seed_source, group). */
int pk_reward_config_merge_user_json(pk_reward_config *c, const char *json, pk_error *err);
/* Reads the reward config of a stored episode config: its "reward" member when the object
 * has one, else the object itself, merged over the defaults. */
int pk_reward_config_from_stored_json(const char *config_json, pk_reward_config *c, pk_error *err);

/* The facts a score is computed from. speedup is the measured baseline/candidate ratio
 * (0 when untimed); times are medians in microseconds (0 when unknown). */
typedef struct pk_turn_facts {
    pk_status status;
    double speedup;
    double time_us;
    double baseline_us;          /* the baseline the speedup used: timed this step or cached */
    double roofline_floor_us;    /* the bound even perfect overlap cannot beat; 0 when none */
    double time_cv, baseline_cv; /* coefficients of variation; 0 when unknown */
    int baseline_cached;         /* the baseline came from the cache (not timed this step) */
} pk_turn_facts;

/* Reads pk_eval_result JSON (status, speedup, candidate.median_us and cv, baseline.us, cv and
 * source, roofline_floor_us or roofline_us in results older than it). The baseline falls back
 * to reference.median_us (results written before `baseline` existed), then to speedup x time
 * (older results whose baseline was cached). Only "status" is required; missing numbers read
 * as 0. */
int pk_turn_facts_from_result_json(const char *result_json, pk_turn_facts *f, pk_error *err);
/* The speedup against the config's baseline, before the transform (0 when unknown). */
double pk_reward_speedup(const pk_reward_config *c, const pk_turn_facts *f);
/* s = 1{correct}(w_correct + T(speedup)) + r_compile 1{compiled} + r_run 1{ran}
 *     - penalty_rejected 1{rejected} - penalty_format 1{format_error} */
double pk_reward_score(const pk_reward_config *c, const pk_turn_facts *f);

/* The terms of that sum, each a signed contribution (penalties are <= 0 for positive
 * settings); total == pk_reward_score(c, f) exactly. */
typedef struct pk_reward_parts {
    double correctness;      /* w_correct 1{correct} */
    double speedup_term;     /* T(speedup) 1{correct} */
    double speedup;          /* the speedup against the config's baseline, before T (0: none) */
    double compile, run;     /* r_compile 1{compiled}, r_run 1{ran} */
    double penalty_rejected; /* -penalty_rejected 1{rejected} */
    double penalty_format;   /* -penalty_format 1{format_error} */
    double total;
} pk_reward_parts;
void pk_reward_breakdown(const pk_reward_config *c, const pk_turn_facts *f, pk_reward_parts *out);

/* The terms of a score, described once (reward/src/terms.c), in the order they are summed: its
 * name, how it is computed, and its weight's key in the reward config. The score
 * (pk_reward_breakdown), the config's defaults, JSON form and merge (the stored config, reset's
 * options, `pkgym reward --config`) and step info.reward_parts all follow this table; adding a
 * term: docs/rewards.md. */
typedef enum pk_reward_term_kind {
    PK_REWARD_TERM_WEIGHT,  /* sign x its weight */
    PK_REWARD_TERM_SPEEDUP, /* T(speedup): the config's transform (transform, clip_lo, clip_hi)
                               of the speedup against its baseline */
} pk_reward_term_kind;

/* The bit of status s in pk_reward_term.statuses. */
#define PK_REWARD_AT(s) (1u << (s))

typedef struct pk_reward_term {
    const char *name; /* its pk_reward_parts field and its key in step info.reward_parts */
    pk_reward_term_kind kind;
    unsigned statuses;     /* the turn statuses it applies at (PK_REWARD_AT bits); 0 at others */
    const char *weight;    /* PK_REWARD_TERM_WEIGHT: its weight's key in the config */
    double weight_default; /* the weight in pk_reward_config_default */
    double sign;           /* +1: a reward, -1: a penalty (the weight is subtracted) */
    size_t weight_at;      /* offsetof(pk_reward_config, the weight) */
    size_t part_at;        /* offsetof(pk_reward_parts, the term) */
} pk_reward_term;

#define PK_REWARD_TERM_COUNT 6
extern const pk_reward_term pk_reward_terms[PK_REWARD_TERM_COUNT];
/* The weight of t (a PK_REWARD_TERM_WEIGHT term) in c. */
double pk_reward_term_weight(const pk_reward_config *c, const pk_reward_term *t);

/* The named values of a breakdown, in the order of step info.reward_parts: each term, the
 * speedup right after the speedup term, then the total. i in [0, PK_REWARD_PART_COUNT). */
#define PK_REWARD_PART_COUNT (PK_REWARD_TERM_COUNT + 2)
const char *pk_reward_part_name(int i);
double pk_reward_part_value(const pk_reward_parts *p, int i);
/* Discounted returns of one trajectory: sum R_t = sum_{i>=t} g^(i-t) s_i, or
 * max R_t = max_{i>=t} g^(i-t) s_i. returns may alias scores. */
void pk_reward_returns(const pk_reward_config *c, const double *scores, int n, double *returns);
/* GRPO advantages over one normalization set: (R - mean) / (std + eps), population std. */
void pk_reward_advantages(const double *returns, int n, double eps, double *advantages);

/* `pkgym reward` and `pkgym export` entry points. */
int pk_cmd_reward(int argc, char **argv);
int pk_cmd_export(int argc, char **argv);

#ifdef __cplusplus
}
#endif
#endif
