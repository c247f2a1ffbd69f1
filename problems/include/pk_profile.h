/* pk_profile: the opt-in profile stage (docs/feedback.md, "Profiles"). After timing, a candidate
 * judged correct may be run twice more inside its sandbox, on its own GPUs, under the timing
 * lock: once with a CUPTI activity-tracing library injected (a timeline of one call per rank:
 * kernels and NCCL operations), once under Nsight Compute (per-kernel metrics per rank). The
 * verdict and the speedup come from the timed run only; a profile's failure is ours and never
 * reaches the reward.
 *
 * This header holds the stage's pure parts (levels, the server-wide budget, the parsers of the
 * profilers' output, the overlap of communication with computation, the feedback text and the
 * SVG timeline); problems/src/job_profile.c runs the stage. */
#ifndef PK_PROFILE_H
#define PK_PROFILE_H

#include <limits.h>
#include <pthread.h>

#include "pk_common.h"

#ifdef __cplusplus
extern "C" {
#endif

enum pk_profile_level { PK_PROFILE_NONE = 0, PK_PROFILE_SUMMARY = 1, PK_PROFILE_FULL = 2 };

/* "none", "summary", "full"; -1 for anything else. */
int pk_profile_level_parse(const char *s);
const char *pk_profile_level_name(int level);

/* ---- The server-wide budget: at most per_minute profiles in any 60 s window, each bounded
 * by seconds_each (its two profiler runs together). Thread-safe: every GPU slot's job asks. */
#define PK_PROFILE_BUDGET_MAX_PER_MINUTE 600
typedef struct pk_profile_budget {
    pthread_mutex_t mu;
    int per_minute;                                     /* 0: profiling is off on this server */
    double seconds_each;                                /* the stage's own time limit */
    double starts_ms[PK_PROFILE_BUDGET_MAX_PER_MINUTE]; /* ring of the last starts */
    int head, n;
    long long taken, refused;
} pk_profile_budget;

/* per_minute in [0, 600], seconds_each in [1, 600]. */
int pk_profile_budget_init(pk_profile_budget *b, int per_minute, double seconds_each,
                           pk_error *err);
void pk_profile_budget_destroy(pk_profile_budget *b);
/* 1: a profile may start at now_ms (counted); 0: over budget (counted as refused). */
int pk_profile_budget_take(pk_profile_budget *b, double now_ms);

/* ---- Timeline intervals (from the CUPTI trace) and their overlap. */
enum pk_prof_kind { PK_PROF_COMPUTE = 0, PK_PROF_COMM = 1, PK_PROF_COPY = 2 };
typedef struct pk_prof_interval {
    int rank, kind, stream;
    double start_ns, end_ns;
    char name[96];
} pk_prof_interval;

typedef struct pk_prof_overlap {
    double comm_ns;    /* union of communication intervals */
    double compute_ns; /* union of computation intervals */
    double overlap_ns; /* their intersection */
    double span_ns;    /* first start to last end, every kind */
    double fraction;   /* overlap_ns / comm_ns; -1 when there is no communication */
} pk_prof_overlap;

/* The overlap on one rank (rank < 0: every interval, whatever its rank). Pure. */
pk_prof_overlap pk_profile_overlap(const pk_prof_interval *iv, int n, int rank);
/* A kernel's function name without namespace, template arguments, parameters or return type,
 * from a mangled name ("_Z12reduce_sliceP...", CUPTI's) or a demangled one ("void
 * ns::reduce_slice<4>(int *)", ncu's): the key that matches the two profilers' rows. */
void pk_profile_kernel_base(const char *name, char *out, size_t cap);
/* NCCL kernels are communication, whoever launched them. */
int pk_profile_kernel_is_comm(const char *name);

/* ---- Per-kernel metrics (from ncu --csv --page raw). Values < 0: not measured. */
#define PK_PROF_STALLS 3
typedef struct pk_prof_kernel {
    int rank; /* the CUDA device inside the sandbox: rank r runs on device r */
    char name[128];
    double duration_ns, dram_pct, sm_pct, tensor_pct, fma_pct, occupancy_pct;
    double nvl_tx_bytes, nvl_rx_bytes;
    int n_stalls;
    char stall[PK_PROF_STALLS][40];
    double stall_val[PK_PROF_STALLS];
} pk_prof_kernel;

typedef struct pk_profile_data {
    int level;
    int world;
    pk_prof_kernel *kernels;
    int n_kernels;
    pk_prof_interval *iv;
    int n_iv;
    int nvlink_measured;          /* the ncu columns for NVLink were there */
    int nvlink_inaccessible;      /* ncu knew them but refused to read them: asked without */
    double roofline_nvlink_bytes; /* per rank and direction, by the problem's roofline; 0 none */
    int trace_ok, ncu_ok;
    char trace_error[200], ncu_error[300];
} pk_profile_data;

void pk_profile_data_free(pk_profile_data *d);

/* The most a profile keeps (what the candidate's process writes is data, and the store keeps
 * it): beyond these the parsers stop with an error. */
#define PK_PROFILE_MAX_INTERVALS 20000
#define PK_PROFILE_MAX_KERNELS 4096

/* Appends the kernels of one ncu CSV log (--csv --page raw; "==PROF==" lines and the
 * program's own output are skipped; the units row scales times to ns and bytes to bytes). */
int pk_profile_ncu_csv_parse(const char *text, pk_profile_data *d, pk_error *err);
/* Appends the intervals of one trace file of the injection library (pk_cupti_trace.c):
 * "K|C|M <device> <stream> <start_ns> <end_ns> <name>" lines; device is the rank. */
int pk_profile_trace_parse(const char *text, pk_profile_data *d, pk_error *err);

/* ---- What the model reads. */
typedef struct pk_profile_summary {
    int slowest_rank; /* by the span of its traced call; -1 when unknown */
    double slowest_span_ns;
    char top_kernel[128]; /* the kernel with the most time on the slowest rank */
    double top_share;     /* its share of that rank's kernel time */
    const char *bound;    /* "memory", "compute", "communication", "latency", "unknown" */
    double overlap;       /* on the slowest rank; -1 when it did not communicate */
} pk_profile_summary;

pk_profile_summary pk_profile_summarize(const pk_profile_data *d);
/* A few lines the model can act on, at most max_chars (cut at a line). malloc'd. */
char *pk_profile_feedback_text(const pk_profile_data *d, size_t max_chars);
/* The raw data (every kernel and interval) as JSON text for the store. malloc'd. */
char *pk_profile_data_to_json(const pk_profile_data *d);
int pk_profile_data_from_json(const char *json, pk_profile_data *d, pk_error *err);
/* The timeline: one lane per rank, compute blue, communication orange, copies grey. */
char *pk_profile_svg(const pk_profile_data *d, const char *title);

/* ---- ncu's metrics per level, filtered by what this ncu knows (query: the text of
 * `ncu --query-metrics`, NULL to take the list as is). Writes "a,b,c" to out. */
int pk_profile_ncu_metrics(int level, const char *query, char *out, size_t cap);
/* Whether ncu refused metrics it lists ("Unable to access the following N metrics"), as its
 * error line (why) or its log says; log may be NULL. */
int pk_profile_ncu_inaccessible(const char *why, const char *log);
/* Removes the NVLink counters (nvltx__*, nvlrx__*) from a comma-separated metric list in
 * place; returns how many metrics are left. */
int pk_profile_drop_nvlink(char *metrics);

/* Nsight Compute's directories for the ncu at NCU (the toolkit's wrapper script, or the frontend
 * itself): beside the toolkit (<cuda>/nsight-compute*) and under OPT_ROOT (NULL: /opt/nvidia), as
 * real paths, at most CAP; returns how many. The profile stage binds them into its sandbox. */
int pk_profile_ncu_dirs(const char *ncu, const char *opt_root, char (*out)[PATH_MAX], int cap);

#ifdef __cplusplus
}
#endif
#endif
