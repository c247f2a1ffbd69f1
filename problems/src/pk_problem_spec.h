/* Internal: the parsed form of a problem's meta.json, shared by the harness and the runner. */
#ifndef PK_PROBLEM_SPEC_H
#define PK_PROBLEM_SPEC_H

#include "pk_problem_module.h"
#include "pk_problems.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PK_SPEC_MAX_LIST 48
#define PK_SPEC_MAX_PHASES 8

typedef enum pk_arg_check { PK_CHECK_ALL = 0, PK_CHECK_ROOT, PK_CHECK_NONE } pk_arg_check;

typedef struct pk_arg_spec {
    char name[32];
    pk_dtype dtype;
    pk_arg_role role;
    char count[128]; /* expression over dims and world */
    pk_arg_check check;
} pk_arg_spec;

typedef struct pk_phase_spec {
    char name[32];
    char flops[128], hbm_bytes[128], nvlink_bytes[128]; /* expressions; "" = 0 */
} pk_phase_spec;

typedef struct pk_string_list {
    int n;
    char *items[PK_SPEC_MAX_LIST];
} pk_string_list;

struct pk_problem {
    char *id, *suite, *name, *title, *category, *dir, *entry, *signature;
    char *prompt, *meta_json, *module_path;
    int device_gpu;   /* "device": "gpu" */
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
    double l2_multiple;
    pk_string_list allowed_calls, forbidden_calls, tags;
    int n_phases;
    pk_phase_spec phases[PK_SPEC_MAX_PHASES];
};

/* Sizes of one problem at one world size. */
typedef struct pk_problem_sizes {
    int world;
    long long dims[PK_MAX_DIMS];
    size_t counts[PK_MAX_ARGS];
    double flops[PK_SPEC_MAX_PHASES], hbm_bytes[PK_SPEC_MAX_PHASES],
        nvlink_bytes[PK_SPEC_MAX_PHASES];
} pk_problem_sizes;

/* Loads one problem directory (<root>/<suite>/<name>). */
int pk_problem_load_dir(const char *dir, const char *suite, const char *name,
                        const char *module_dir, pk_problem **out, pk_error *err);
void pk_problem_free(pk_problem *p);
/* Evaluates dims, counts and roofline inputs at `world` ranks (world must be allowed). */
int pk_problem_sizes_at(const pk_problem *p, int world, pk_problem_sizes *out, pk_error *err);

size_t pk_dtype_size(pk_dtype t);
const char *pk_dtype_name(pk_dtype t);
int pk_dtype_from_name(const char *name); /* -1 if unknown */
/* Default tolerances per dtype (used when meta.json has none). */
void pk_dtype_tolerance(pk_dtype t, double *atol, double *rtol);

#ifdef __cplusplus
}
#endif
#endif
