/* Internal pieces of the harness: symbol checks, compile command, roofline, process spawn. */
#ifndef PK_HARNESS_INTERNAL_H
#define PK_HARNESS_INTERNAL_H

#include "pk_harness.h"
#include "pk_problem_spec.h"
#include "pk_sandbox.h"

#define PK_HARNESS_VERSION "harness-1"

/* libelf checks of a compiled candidate: entry point, allowlisted undefined symbols,
 * forbidden calls, no interposing definitions. Adds checks to res and, when one fails, sets
 * res->status (format_error or rejected with res->rule). Returns non-zero only if the file
 * could not be read as ELF. */
int pk_elf_check(const char *so_path, const pk_problem *p, pk_eval_result *res, pk_error *err);
/* Scans the executable sections for syscall, sysenter and int 0x80 (rule raw_syscall). */
int pk_elf_scan_syscalls(const char *so_path, pk_eval_result *res, pk_error *err);
/* Shell-style pattern with a trailing '*' wildcard. */
int pk_symbol_matches(const char *pattern, const char *name);

/* Hardware peaks (problems/hardware.json) for the GPU named gpu_name. */
typedef struct pk_hw_peaks {
    char name[32];
    double bf16_tflops, hbm_tbps, nvlink_gbps;
} pk_hw_peaks;
int pk_hw_peaks_find(const char *hardware_json, const char *gpu_name, pk_hw_peaks *out,
                     pk_error *err);
/* Sum over phases of max(F/P, B_hbm/B_mem, B_nvl/B_link), microseconds; 0 with no phases. */
double pk_roofline_us(const pk_problem *p, const pk_problem_sizes *sz, const pk_hw_peaks *hw);

/* Runs argv through the sandbox (pk_sandbox_run). */
int pk_harness_spawn(const pk_sandbox_opts *opts, char *const argv[], pk_sandbox_result *res,
                     pk_error *err);
void pk_harness_spawn_free(pk_sandbox_result *res);

/* Paths the harness needs: problem root, module dir, runner binary, candidate include dir. */
typedef struct pk_harness_paths {
    char root[512], module_dir[512], runner[512], include_dir[512], hardware_json[512];
} pk_harness_paths;
void pk_harness_paths_get(pk_harness_paths *out);

/* What the runner reported, beyond the trials and timings it writes straight into res. */
typedef struct pk_run_report {
    int ok, error_rank, timed, unsynchronized;
    int guard_violation, timed_wrong, timed_inputs_modified, verified_calls;
    char error[512], unsync_detail[256], gpu_name[64], guard_detail[256];
    double setup_ms, check_ms, timing_ms, init_ms, arena_ms;
} pk_run_report;

/* Reads the runner's msgpack result file: trials and timings into res, the rest into rep. */
int pk_run_result_read(const char *path, pk_eval_result *res, pk_run_report *rep, pk_error *err);

#endif
