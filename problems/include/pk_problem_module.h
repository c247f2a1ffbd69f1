/* pk_problem_module.h: the ABI between the runner and one problem's compiled module.
 *
 * Each problem directory holds problem.cu (or problem.c for host problems), built into
 * pkprob_<suite>_<id>.so and loaded by the runner with dlopen. It supplies only what is
 * specific to the problem: its baseline and the call with the problem's exact signature.
 * Buffers, input generation, poisoning, checking and timing are generic harness code,
 * driven by meta.json. Candidates never see this header.
 */
#ifndef PK_PROBLEM_MODULE_H
#define PK_PROBLEM_MODULE_H

#include "candidate/pk_ctx.h"

/* Version 2 added the call's params, the init/fini hooks and a custom checker; a module of
 * version 1 still loads (its struct is a prefix of version 2's). */
#define PK_PROBLEM_ABI_VERSION 2
#define PK_MAX_ARGS 16
#define PK_MAX_DIMS 12
#define PK_MAX_PARAMS 12

typedef enum pk_dtype {
    PK_DTYPE_BF16 = 0,
    PK_DTYPE_F16,
    PK_DTYPE_F32,
    PK_DTYPE_F64,
    PK_DTYPE_I32,
    PK_DTYPE_I64,
    PK_DTYPE_F8E4M3, /* float8 e4m3fn (__nv_fp8_e4m3): no infinities, NaN = 0x7f/0xff */
    PK_DTYPE_I8,
    PK_DTYPE_U8,
    PK_DTYPE_COUNT
} pk_dtype;

typedef enum pk_arg_role { PK_ARG_INPUT = 0, PK_ARG_OUTPUT, PK_ARG_INOUT } pk_arg_role;

/* One call of the problem on this rank. Argument order is meta.json's "args" order. */
typedef struct pk_problem_call {
    const pk_ctx *ctx;
    int n_args;
    void *args[PK_MAX_ARGS];    /* device pointers (host pointers on host problems) */
    size_t counts[PK_MAX_ARGS]; /* elements of each argument on this rank */
    int n_dims;
    long long dims[PK_MAX_DIMS]; /* meta.json "dims", in order, after world-size expressions */
    int root;                    /* meta.json "root" (rooted collectives), else 0 */
    int n_params;
    double params[PK_MAX_PARAMS]; /* meta.json "params", in order, as this call sees them */
} pk_problem_call;

/* A custom checker's verdict on one output of one call on this rank. */
typedef struct pk_check_report {
    int passed;
    long long bad_index; /* first failing element, -1 if none */
    double expected, got;
    double max_abs, max_rel;
} pk_check_report;

typedef struct pk_problem_module {
    unsigned abi_version; /* PK_PROBLEM_ABI_VERSION */
    /* The baseline on ctx->stream: plain kernels plus host-driven NCCL (or MPI on host problems).
     */
    int (*reference)(const pk_problem_call *call);
    /* Calls the candidate's entry point `fn` with the problem's exact C signature. */
    int (*invoke)(void *fn, const pk_problem_call *call);
    /* Optional: adjusts the inputs for (seed, trial) on ctx->rank after the generic generators
     * (e.g. values that must be consistent across arguments). Enqueues its work on ctx->stream. */
    int (*generate)(const pk_problem_call *call, uint64_t seed, int trial);
    /* Version 2. Optional: once per rank after the communicator and arena exist, before any
     * call (cuBLAS handles, workspaces, sub-communicators), and once at the end. */
    int (*init)(const pk_ctx *ctx);
    void (*fini)(const pk_ctx *ctx);
    /* Optional: checks output `arg` of a call whose outputs are in `got` against the reference's
     * in `want` (same inputs, same ctx), for outputs with "checker": "custom" (e.g. top-k with
     * ties). Device pointers; may synchronize ctx->stream. Returns 0 when it ran. */
    int (*check)(const pk_problem_call *want, const pk_problem_call *got, int arg,
                 pk_check_report *out);
} pk_problem_module;

#ifdef __cplusplus
extern "C"
#endif
    const pk_problem_module *
    pk_problem_module_v1(void);

#endif
