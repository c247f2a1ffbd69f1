/* The parsed form of a problem's meta.json, shared by the harness, the runner (pk-runner) and
 * pk_remote (library pk_problem_spec). */
#ifndef PK_PROBLEM_SPEC_H
#define PK_PROBLEM_SPEC_H

#include "pk_problem_module.h"
#include "pk_problems.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PK_SPEC_MAX_LIST 48
#define PK_SPEC_MAX_PHASES 8
#define PK_MAX_TIMING_BLOCKS 16 /* timing.blocks: timed blocks per side */

typedef enum pk_arg_check { PK_CHECK_ALL = 0, PK_CHECK_ROOT, PK_CHECK_NONE } pk_arg_check;

/* How an input argument's values are drawn (meta.json "gen"). */
typedef enum pk_gen_kind {
    PK_GEN_NORMAL = 0, /* normal(mean, std): the default for floating-point arguments */
    PK_GEN_UNIFORM,    /* uniform(lo, hi) */
    PK_GEN_LATTICE,    /* k/16 for k in [-16, 16] (integers: k): sums stay exact */
    PK_GEN_INT,        /* int(lo, hi): integers in [lo, hi]; the default for integer arguments */
    PK_GEN_INDEX,      /* index(n): valid indices in [0, n) */
} pk_gen_kind;

/* Whose draw an argument holds: its own per rank (default), the same on every rank
 * ("replicated"), or its slice of one global tensor ("sharded": rank r holds global elements
 * [r*count, (r+1)*count)). */
typedef enum pk_gen_scope { PK_GEN_PER_RANK = 0, PK_GEN_REPLICATED, PK_GEN_SHARDED } pk_gen_scope;

/* Input regimes (docs/problems.md, "Input regimes"): how a floating-point input's draw is
 * shaped in one call. Each call key draws one of its argument's allowed regimes, secretly per
 * step, so that no statistic of PKB's i.i.d. N(0, 1) inputs (a shard standing in for the
 * whole, part of the data for all of it, an expected norm, a fixed threshold) is right. Every
 * regime but iid also scales each rank differently (2^-2..2^2, ranks apart). */
typedef enum pk_regime {
    PK_REGIME_IID = 0, /* the generator as written (PKB's inputs) */
    PK_REGIME_RANK,    /* a small scale (2^-8..2^-2, ranks apart) and an offset per rank */
    PK_REGIME_ROW,     /* scales that ramp over the rows and the columns (feature, expert) */
    PK_REGIME_HEAVY,   /* heavy tails (a factor per element, tail ~1/f^2) and rare outliers */
    PK_REGIME_PEAKED,  /* a few large positive entries per row (dominant logits) */
    /* (row, heavy and peaked all ramp their scale over the rows and the columns) */
    PK_REGIME_CANCEL, /* large terms that cancel across rank pairs and element pairs */
    PK_REGIME_COUNT
} pk_regime;

/* The regimes a floating-point input draws from when meta.json names none: all but cancel
 * (an output that cancels needs a tolerance built for it, so a problem asks for it). Five, so
 * that the five trials of a step see every one. */
#define PK_REGIMES_DEFAULT                                                                         \
    ((1u << PK_REGIME_IID) | (1u << PK_REGIME_RANK) | (1u << PK_REGIME_ROW) |                      \
     (1u << PK_REGIME_HEAVY) | (1u << PK_REGIME_PEAKED))

typedef struct pk_gen_spec {
    pk_gen_kind kind;
    double a, b;         /* normal: mean, std; uniform: lo, hi */
    char lo[64], hi[64]; /* int: [lo, hi]; index: hi; expressions over dims and world */
    pk_gen_scope scope;  /* meta.json "scope" */
    unsigned regimes;    /* meta.json "regimes": a bit per pk_regime; iid only for lattice, int,
                            index */
    char row[64];        /* meta.json "row": elements per row (an expression); "" = the count */
} pk_gen_spec;

/* How an output is judged. */
typedef enum pk_checker {
    PK_CHECKER_ALLCLOSE = 0, /* |got - want| <= atol + atol_rms rms(want) + rtol |want|, no NaN */
    PK_CHECKER_EXACT,        /* equal values (NaN never passes) */
    PK_CHECKER_BUDGET,       /* allclose, but a share `budget` of elements may miss by max_ulp */
    PK_CHECKER_CUSTOM,       /* the problem module's check() (ties, decision boundaries) */
} pk_checker;

/* A named scalar passed by value to the entry point and the reference (meta.json "params"). */
typedef struct pk_param_spec {
    char name[32];
    char expr[128]; /* an integer expression over dims, world and trial, or "" */
    double value;   /* when expr is "" */
} pk_param_spec;

typedef struct pk_arg_spec {
    char name[32];
    pk_dtype dtype;
    pk_arg_role role;
    char count[128]; /* expression over dims and world */
    pk_arg_check check;
    pk_gen_spec gen;   /* inputs and inouts */
    double atol, rtol; /* outputs: this argument's tolerance; < 0: the problem's */
    /* outputs: how they are judged (meta.json "checker") */
    pk_checker checker;
    double atol_rms; /* adds atol_rms x rms(reference output) to atol */
    double budget;   /* PK_CHECKER_BUDGET: share of elements allowed outside the tolerance... */
    int max_ulp;     /* ...each at most this many representable values away */
    /* allclose and budget outputs: |got - want|_2 <= norm_rtol |want|_2 over the elements where
     * rtol |want| >= atol (all when rtol is 0) (meta.json "norm_rtol"; < 0: max(rtol, atol_rms)
     * / 2; 0: off) */
    double norm_rtol;
} pk_arg_spec;

/* The number format a roofline phase's math runs in; its flops count at that format's peak. */
typedef enum pk_math_dtype {
    PK_MATH_BF16 = 0, /* the default */
    PK_MATH_FP16,
    PK_MATH_FP8,
    PK_MATH_TF32,
    PK_MATH_FP32,
    PK_MATH_COUNT
} pk_math_dtype;

typedef struct pk_phase_spec {
    char name[32];
    char flops[128], hbm_bytes[128], nvlink_bytes[128]; /* expressions; "" = 0 */
    pk_math_dtype math;                                 /* "dtype" in meta.json */
} pk_phase_spec;

typedef struct pk_string_list {
    int n;
    char *items[PK_SPEC_MAX_LIST];
} pk_string_list;

struct pk_problem {
    char *id, *suite, *name, *title, *category, *dir, *entry, *signature;
    char *prompt, *meta_json, *module_path;
    int device_gpu;   /* "device": "gpu" */
    int pkb_number;   /* "pkb": {"number": N}: ParallelKernelBench's problem N; 0: not PKB's */
    char launcher[8]; /* "fork" or "mpi" */
    int world_size;   /* default */
    int world_sizes[PK_MAX_RANKS];
    int n_world_sizes;
    int n_dims;
    char dim_names[PK_MAX_DIMS][32];
    char dim_exprs[PK_MAX_DIMS][128];
    int root;
    int n_args;
    pk_arg_spec args[PK_MAX_ARGS];
    long long scratch_bytes;
    double atol, rtol; /* < 0: per-dtype default */
    int trials;
    int warmup_iters, warmup_ms, iters;
    int timing_blocks; /* timed blocks per side, interleaved (timing.blocks, 1..16) */
    double l2_multiple;
    pk_string_list allowed_calls, forbidden_calls, tags;
    int n_phases;
    pk_phase_spec phases[PK_SPEC_MAX_PHASES];
    int n_params;
    pk_param_spec params[PK_MAX_PARAMS];
    pk_string_list constraints; /* expressions over dims and world that must be 1 */
    int link_cublas;            /* "libraries": ["cublas"]: candidates may call cuBLAS(Lt) */
    int link_cufft;             /* "libraries": ["cufft"]: candidates may call cuFFT */
    int device_api; /* "device_api": true: the candidate gets NCCL's device API (ncclDevComm) */
    /* Named dims overrides ("dims_presets": {"pkb": {...}}); pkgym check --dims NAME. */
    int n_presets;
    char preset_names[4][16];
    char *preset_json[4]; /* the preset's object, as JSON text */
};

/* Sizes of one problem at one world size. */
typedef struct pk_problem_sizes {
    int world;
    long long dims[PK_MAX_DIMS];
    size_t counts[PK_MAX_ARGS];
    long long gen_lo[PK_MAX_ARGS], gen_hi[PK_MAX_ARGS]; /* int and index generators */
    long long row_len[PK_MAX_ARGS];                     /* regimes' rows (>= 1) */
    double flops[PK_SPEC_MAX_PHASES], hbm_bytes[PK_SPEC_MAX_PHASES],
        nvlink_bytes[PK_SPEC_MAX_PHASES];
} pk_problem_sizes;

/* Loads one problem directory (<root>/<suite>/<name>). */
int pk_problem_load_dir(const char *dir, const char *suite, const char *name,
                        const char *module_dir, pk_problem **out, pk_error *err);
void pk_problem_free(pk_problem *p);
/* Evaluates dims, counts and roofline inputs at `world` ranks (world must be allowed), after
 * the constraints hold. */
int pk_problem_sizes_at(const pk_problem *p, int world, pk_problem_sizes *out, pk_error *err);
/* Overrides dims (before sizes are evaluated): "NAME=VALUE,..." or a preset's name. The loaded
 * problem is changed; the constraints are checked again at every allowed world size. */
int pk_problem_override_dims(pk_problem *p, const char *spec, pk_error *err);
/* Values of the params for one call: key is the trial (or the harness's call key). */
int pk_problem_params_at(const pk_problem *p, const pk_problem_sizes *sz, long long key,
                         double *out, pk_error *err);

size_t pk_dtype_size(pk_dtype t);
const char *pk_dtype_name(pk_dtype t);
int pk_dtype_from_name(const char *name); /* -1 if unknown */
/* Default tolerances per dtype (used when meta.json has none). */
void pk_dtype_tolerance(pk_dtype t, double *atol, double *rtol);
/* The tolerance that applies to argument i: its own, else the problem's, else its dtype's. */
void pk_arg_tolerance(const pk_problem *p, int i, double *atol, double *rtol);
/* Parses a generator ("normal(0, 1)", "uniform(-1, 1)", "lattice", "int(0, 9)", "index(n)").
 * Integer kinds need integer dtypes and floating kinds floating ones. */
int pk_gen_parse(const char *text, pk_dtype dtype, pk_gen_spec *out, pk_error *err);
/* The default generator of a dtype: normal(0, 1) for floats, int(-16, 16) for integers. */
void pk_gen_default(pk_dtype dtype, pk_gen_spec *out);
int pk_dtype_is_integer(pk_dtype t);
/* Regimes by name: "iid", "rank", "row", "heavy", "peaked", "cancel". */
const char *pk_regime_name(pk_regime r);
int pk_regime_from_name(const char *name); /* -1 if unknown */
/* The norm-wise tolerance that applies to output i (0: no norm-wise check). */
double pk_arg_norm_rtol(const pk_problem *p, int i);

/* Math dtypes by name: "bf16", "fp16", "fp8", "tf32", "fp32" (also "f16", "f32"). */
const char *pk_math_dtype_name(pk_math_dtype t);
int pk_math_dtype_from_name(const char *name); /* -1 if unknown */

#ifdef __cplusplus
}
#endif
#endif
