/* Internal pieces of the harness: symbol checks, compile command, roofline, process spawn. */
#ifndef PK_HARNESS_INTERNAL_H
#define PK_HARNESS_INTERNAL_H

#include "pk_harness.h"
#include "pk_problem_spec.h"
#include "pk_sandbox.h"

#define PK_HARNESS_VERSION "harness-1"

/* The stage limits when pk_eval_opts leaves them 0 (pk_harness.h): one definition for the
 * compile and run sandboxes, the warm run and the timeout verdict. */
#define PK_DEFAULT_COMPILE_TIMEOUT_MS 120000
#define PK_DEFAULT_RUN_TIMEOUT_MS 60000
static inline int pk_compile_timeout_ms(const pk_eval_opts *o) {
    return o->compile_timeout_ms > 0 ? o->compile_timeout_ms : PK_DEFAULT_COMPILE_TIMEOUT_MS;
}
static inline int pk_run_timeout_ms(const pk_eval_opts *o) {
    return o->run_timeout_ms > 0 ? o->run_timeout_ms : PK_DEFAULT_RUN_TIMEOUT_MS;
}

/* libelf checks of a compiled candidate: entry point, allowlisted undefined symbols,
 * forbidden calls, no interposing definitions. Adds checks to res and, when one fails, sets
 * res->status (format_error or rejected with res->rule). Returns non-zero only if the file
 * could not be read as ELF. */
int pk_elf_check(const char *so_path, const pk_problem *p, pk_eval_result *res, pk_error *err);
/* Scans the executable sections for syscall, sysenter and int 0x80 (rule raw_syscall). */
int pk_elf_scan_syscalls(const char *so_path, pk_eval_result *res, pk_error *err);
/* Shell-style pattern with a trailing '*' wildcard. */
int pk_symbol_matches(const char *pattern, const char *name);

/* Hardware peaks (problems/hardware.json) for the GPU named gpu_name: dense flops per math
 * dtype, HBM bandwidth, NVLink bandwidth per direction. */
typedef struct pk_hw_peaks {
    char name[32];
    double tflops[PK_MATH_COUNT];
    double hbm_tbps, nvlink_gbps;
} pk_hw_peaks;
int pk_hw_peaks_find(const char *hardware_json, const char *gpu_name, pk_hw_peaks *out,
                     pk_error *err);

/* The two rooflines of a problem (docs/problems.md, "Roofline"), microseconds, 0 with no
 * phases. floor_us: max over resources of the resource's total over all phases (math of each
 * dtype, HBM, NVLink), a bound that even perfect overlap cannot beat. no_overlap_us: the sum
 * over phases of max(F/P_dtype, B_hbm/BW_hbm, B_nvl/BW_link), the phases one after another. */
typedef struct pk_roofline {
    double floor_us, no_overlap_us;
    const char *bound_by; /* the resource that sets floor_us: "bf16 math", "HBM", "NVLink" */
} pk_roofline;
void pk_roofline_compute(const pk_problem *p, const pk_problem_sizes *sz, const pk_hw_peaks *hw,
                         pk_roofline *out);

/* Safety margin for peaks that are slightly understated: a median is rejected only below
 * PK_ROOFLINE_MARGIN x floor. The datasheet's tensor peaks assume a 1830 MHz SM clock, which
 * can boost to 1980 MHz (+8.2%); 1/0.9 leaves 11% (docs/problems.md). */
#define PK_ROOFLINE_MARGIN 0.9
/* Records both rooflines in res and the check "roofline_floor"; a candidate median below
 * PK_ROOFLINE_MARGIN x floor sets status rejected, rule roofline_floor. */
void pk_roofline_judge(const pk_roofline *rl, const char *hw_name, pk_eval_result *res);

/* Runs argv through the sandbox (pk_sandbox_run). */
int pk_harness_spawn(const pk_sandbox_opts *opts, char *const argv[], pk_sandbox_result *res,
                     pk_error *err);
void pk_harness_spawn_free(pk_sandbox_result *res);
/* nvcc runs this much nicer than the runs (pk_sandbox_opts.nice), so that the ranks' start-up
 * and timing get the CPU first while compiles fill the rest: PKGYM_COMPILE_NICE, default 5. */
#define PK_COMPILE_NICE 5
int pk_harness_compile_nice(void);

/* Paths the harness needs: problem root, module dir, runner binary, candidate include dir. */
typedef struct pk_harness_paths {
    char root[512], module_dir[512], runner[512], include_dir[512], hardware_json[512];
} pk_harness_paths;
void pk_harness_paths_get(pk_harness_paths *out);

/* What the runner reported, beyond the trials and timings it writes straight into res. */
typedef struct pk_run_report {
    int ok, error_rank, timed, unsynchronized;
    int guard_violation, timed_wrong, timed_inputs_modified, verified_calls, trials_planned;
    char error[512], unsync_detail[256], gpu_name[64], guard_detail[256];
    double setup_ms, check_ms, timing_ms, init_ms, arena_ms, verify_ms, teardown_ms, lock_wait_ms;
    double timing_expect_ms, timing_hold_ms;
} pk_run_report;

/* Reads the runner's msgpack result file: trials and timings into res, the rest into rep. */
int pk_run_result_read(const char *path, pk_eval_result *res, pk_run_report *rep, pk_error *err);

#endif
