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

#define PK_PROBLEM_ABI_VERSION 1
#define PK_MAX_ARGS 8
#define PK_MAX_DIMS 8

typedef enum pk_dtype {
    PK_DTYPE_BF16 = 0,
    PK_DTYPE_F16,
    PK_DTYPE_F32,
    PK_DTYPE_F64,
    PK_DTYPE_I32,
    PK_DTYPE_I64,
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
} pk_problem_call;

typedef struct pk_problem_module {
    unsigned abi_version; /* PK_PROBLEM_ABI_VERSION */
    /* The baseline on ctx->stream: plain kernels plus host-driven NCCL (or MPI on host problems).
     */
    int (*reference)(const pk_problem_call *call);
    /* Calls the candidate's entry point `fn` with the problem's exact C signature. */
    int (*invoke)(void *fn, const pk_problem_call *call);
    /* Optional: fills the inputs for (seed, trial) on ctx->rank. NULL: the generic generator. */
    int (*generate)(const pk_problem_call *call, uint64_t seed, int trial);
} pk_problem_module;

#ifdef __cplusplus
extern "C"
#endif
    const pk_problem_module *
    pk_problem_module_v1(void);

#endif
