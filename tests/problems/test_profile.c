#define _GNU_SOURCE
/* The profile stage's pure parts (pk_profile.h): the overlap of communication with computation
 * on hand-made timelines, the parsers of ncu's CSV log and of the tracing library's files (hand
 * written fixtures in fixtures/profile/, in the profilers' formats), the budget, the metric
 * list, the feedback text, the stored JSON and the SVG. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <unistd.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "pk_profile.h"

#define FIX PK_PROFILE_FIXTURES "/"

static char *slurp(const char *name) {
    char path[1024];
    snprintf(path, sizeof path, FIX "%s", name);
    char *text = NULL;
    pk_error err;
    assert_int_equal(pk_read_file(path, &text, NULL, &err), PK_OK);
    return text;
}

static pk_prof_interval iv(int rank, int kind, int stream, double s, double e, const char *name) {
    pk_prof_interval v;
    memset(&v, 0, sizeof v);
    v.rank = rank;
    v.kind = kind;
    v.stream = stream;
    v.start_ns = s;
    v.end_ns = e;
    snprintf(v.name, sizeof v.name, "%s", name);
    return v;
}

/* A GEMM, then an all-reduce of its output, on one stream: nothing overlaps. */
static void test_overlap_serialised(void **state) {
    (void)state;
    pk_prof_interval t[] = {iv(0, PK_PROF_COMPUTE, 7, 0, 100000, "gemm"),
                            iv(0, PK_PROF_COMM, 7, 100000, 250000, "ncclDevKernel_AllReduce")};
    pk_prof_overlap o = pk_profile_overlap(t, 2, 0);
    assert_float_equal(o.comm_ns, 150000, 1e-6);
    assert_float_equal(o.compute_ns, 100000, 1e-6);
    assert_float_equal(o.overlap_ns, 0, 1e-6);
    assert_float_equal(o.fraction, 0, 1e-9);
    assert_float_equal(o.span_ns, 250000, 1e-6);
}

/* Four GEMM chunks on stream 7, the all-reduce of chunk c on stream 13 after GEMM c: the
 * all-reduces of chunks 0-2 run under the GEMMs of chunks 1-3. */
static void test_overlap_two_streams(void **state) {
    (void)state;
    pk_prof_interval t[] = {
        iv(0, PK_PROF_COMPUTE, 7, 0, 30, "gemm"),  iv(0, PK_PROF_COMPUTE, 7, 30, 60, "gemm"),
        iv(0, PK_PROF_COMPUTE, 7, 60, 90, "gemm"), iv(0, PK_PROF_COMPUTE, 7, 90, 120, "gemm"),
        iv(0, PK_PROF_COMM, 13, 30, 55, "nccl"),   iv(0, PK_PROF_COMM, 13, 60, 85, "nccl"),
        iv(0, PK_PROF_COMM, 13, 90, 115, "nccl"),  iv(0, PK_PROF_COMM, 13, 120, 145, "nccl"),
    };
    pk_prof_overlap o = pk_profile_overlap(t, 8, 0);
    assert_float_equal(o.comm_ns, 100, 1e-9);
    assert_float_equal(o.compute_ns, 120, 1e-9);
    assert_float_equal(o.overlap_ns, 75, 1e-9);
    assert_float_equal(o.fraction, 0.75, 1e-12);
    assert_float_equal(o.span_ns, 145, 1e-9);
}

/* Overlapping intervals of one kind are merged before measuring; copies count for the span
 * only; other ranks and empty intervals are left out; no communication gives -1. */
static void test_overlap_unions_and_ranks(void **state) {
    (void)state;
    pk_prof_interval t[] = {
        iv(0, PK_PROF_COMPUTE, 7, 0, 50, "a"),    iv(0, PK_PROF_COMPUTE, 8, 20, 80, "b"),
        iv(0, PK_PROF_COMM, 9, 40, 60, "nccl"),   iv(0, PK_PROF_COMM, 10, 50, 100, "nccl"),
        iv(0, PK_PROF_COPY, 7, 100, 130, "copy"), iv(1, PK_PROF_COMM, 7, 0, 1000, "nccl"),
        iv(0, PK_PROF_COMM, 7, 70, 70, "empty"),
    };
    pk_prof_overlap o = pk_profile_overlap(t, 7, 0);
    assert_float_equal(o.compute_ns, 80, 1e-9);
    assert_float_equal(o.comm_ns, 60, 1e-9);
    assert_float_equal(o.overlap_ns, 40, 1e-9);
    assert_float_equal(o.fraction, 40.0 / 60.0, 1e-12);
    assert_float_equal(o.span_ns, 130, 1e-9);
    pk_prof_overlap all = pk_profile_overlap(t, 7, -1);
    assert_float_equal(all.comm_ns, 1000, 1e-9);
    pk_prof_interval only_compute[] = {iv(0, PK_PROF_COMPUTE, 7, 0, 10, "a")};
    assert_float_equal(pk_profile_overlap(only_compute, 1, 0).fraction, -1, 0);
    assert_float_equal(pk_profile_overlap(NULL, 0, 0).fraction, -1, 0);
}

static void test_kernel_names(void **state) {
    (void)state;
    char b[128];
    pk_profile_kernel_base("_Z12reduce_slicePKfPfi", b, sizeof b);
    assert_string_equal(b, "reduce_slice");
    pk_profile_kernel_base("_ZN7cutlass7Kernel2I4GemmEEvNT_6ParamsE", b, sizeof b);
    assert_string_equal(b, "Kernel2");
    pk_profile_kernel_base("void reduce_slice<4>(ncclDevComm, const uint4 *)", b, sizeof b);
    assert_string_equal(b, "reduce_slice");
    pk_profile_kernel_base("void ns::inner::scale(float *, int)", b, sizeof b);
    assert_string_equal(b, "scale");
    pk_profile_kernel_base("nvjet_tst_128x256_64x4_2x1_v_bz_coopA_NNT", b, sizeof b);
    assert_string_equal(b, "nvjet_tst_128x256_64x4_2x1_v_bz_coopA_NNT");
    assert_true(pk_profile_kernel_is_comm(
        "_Z40ncclDevKernel_AllReduce_Sum_bf16_RING_LL24ncclDevKernelArgsStorageILm4096EE"));
    assert_true(
        pk_profile_kernel_is_comm("ncclDevKernel_Generic(ncclDevKernelArgsStorage<4096ul>)"));
    assert_false(pk_profile_kernel_is_comm("void reduce_slice<4>(ncclDevComm)"));
}

static void test_ncu_csv_two_processes(void **state) {
    (void)state;
    char *text = slurp("ncu_gemm_allreduce_2ranks.csv");
    pk_profile_data d;
    memset(&d, 0, sizeof d);
    pk_error err;
    assert_int_equal(pk_profile_ncu_csv_parse(text, &d, &err), PK_OK);
    assert_int_equal(d.n_kernels, 4);
    assert_int_equal(d.world, 2);
    assert_true(d.nvlink_measured);
    const pk_prof_kernel *g0 = &d.kernels[0], *r1 = &d.kernels[3];
    assert_int_equal(g0->rank, 0);
    assert_string_equal(g0->name, "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_"
                                  "warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas");
    assert_float_equal(g0->duration_ns, 26850, 1e-6); /* usecond -> ns */
    assert_float_equal(g0->dram_pct, 22.41, 1e-9);
    assert_float_equal(g0->tensor_pct, 71.45, 1e-9);
    assert_float_equal(g0->fma_pct, 3.12, 1e-9);
    assert_float_equal(g0->sm_pct, 68.90, 1e-9);
    assert_float_equal(g0->occupancy_pct, 24.87, 1e-9);
    assert_int_equal(g0->n_stalls, 3); /* the top three, largest first */
    assert_string_equal(g0->stall[0], "math_pipe_throttle");
    assert_string_equal(g0->stall[1], "long_scoreboard");
    assert_string_equal(g0->stall[2], "wait");
    assert_float_equal(g0->stall_val[0], 3.07, 1e-9);
    assert_int_equal(r1->rank, 1);
    assert_string_equal(r1->name, "reduce_slice");
    assert_float_equal(r1->duration_ns, 1013250, 1e-6); /* "1,013.25" usecond */
    assert_float_equal(r1->nvl_tx_bytes, 8.39e6, 1e-3); /* Mbyte -> bytes */
    assert_int_equal(r1->n_stalls, 3);                  /* zero stalls are not listed */
    assert_string_equal(r1->stall[0], "long_scoreboard");
    pk_profile_data_free(&d);
    free(text);
}

static void test_ncu_csv_base_units_and_na(void **state) {
    (void)state;
    char *text = slurp("ncu_base_units.csv");
    pk_profile_data d;
    memset(&d, 0, sizeof d);
    pk_error err;
    assert_int_equal(pk_profile_ncu_csv_parse(text, &d, &err), PK_OK);
    assert_int_equal(d.n_kernels, 2);
    assert_false(d.nvlink_measured);
    assert_string_equal(d.kernels[0].name, "vector_add");
    assert_float_equal(d.kernels[0].duration_ns, 21472, 1e-9);
    assert_float_equal(d.kernels[0].tensor_pct, -1, 0);    /* not asked for */
    assert_float_equal(d.kernels[1].occupancy_pct, -1, 0); /* "n/a" */
    assert_int_equal(d.kernels[1].n_stalls, 0);
    pk_profile_data_free(&d);
    free(text);
}

static void test_ncu_csv_errors(void **state) {
    (void)state;
    pk_profile_data d;
    memset(&d, 0, sizeof d);
    pk_error err;
    /* ncu ran but profiled nothing (every kernel filtered out, or none in the range) */
    assert_int_equal(pk_profile_ncu_csv_parse("==PROF== Connected to process 1 (/x)\n"
                                              "==WARNING== No kernels were profiled.\n",
                                              &d, &err),
                     PK_ERR_INVALID);
    assert_non_null(strstr(err.message, "no header row"));
    assert_int_equal(pk_profile_ncu_csv_parse(NULL, &d, &err), PK_ERR_INVALID);
    pk_profile_data_free(&d);
}

static void load_traces(pk_profile_data *d) {
    const char *files[] = {"trace.1001", "trace.1002"};
    for (int i = 0; i < 2; i++) {
        char *text = slurp(files[i]);
        pk_error err;
        assert_int_equal(pk_profile_trace_parse(text, d, &err), PK_OK);
        free(text);
    }
}

static void test_trace_parse(void **state) {
    (void)state;
    pk_profile_data d;
    memset(&d, 0, sizeof d);
    load_traces(&d);
    assert_int_equal(d.n_iv, 9);
    assert_int_equal(d.world, 2);
    assert_int_equal(d.iv[1].kind, PK_PROF_COMM);
    assert_string_equal(d.iv[1].name, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL");
    assert_int_equal(d.iv[0].kind, PK_PROF_COMPUTE);
    assert_int_equal(d.iv[5].kind, PK_PROF_COPY); /* memset */
    assert_int_equal(d.iv[8].kind, PK_PROF_COMM); /* peer copy */
    assert_int_equal(d.iv[8].stream, 21);
    assert_string_equal(d.iv[8].name, "peer copy");
    assert_float_equal(pk_profile_overlap(d.iv, d.n_iv, 0).fraction, 0.5, 1e-12);
    assert_float_equal(pk_profile_overlap(d.iv, d.n_iv, 1).fraction, 0, 0);
    pk_error err;
    assert_int_equal(pk_profile_trace_parse("K 0 7 10 5 backwards\n", &d, &err), PK_ERR_INVALID);
    assert_non_null(strstr(err.message, "line 1"));
    assert_int_equal(pk_profile_trace_parse("X 0 7 1 2 what\n", &d, &err), PK_ERR_INVALID);
    pk_profile_data_free(&d);
    /* What a process writes is capped: a flood of intervals is refused, not kept. */
    pk_strbuf flood = {0};
    for (int i = 0; i <= PK_PROFILE_MAX_INTERVALS; i++)
        pk_strbuf_printf(&flood, "K 0 7 %d %d k\n", i, i + 1);
    memset(&d, 0, sizeof d);
    assert_int_equal(pk_profile_trace_parse(flood.data, &d, &err), PK_ERR_INVALID);
    assert_non_null(strstr(err.message, "more than 20000 intervals"));
    assert_int_equal(d.n_iv, PK_PROFILE_MAX_INTERVALS);
    pk_profile_data_free(&d);
    pk_strbuf_free(&flood);
}

static void test_budget(void **state) {
    (void)state;
    pk_profile_budget b;
    pk_error err;
    assert_int_equal(pk_profile_budget_init(&b, 2, 30, &err), PK_OK);
    assert_int_equal(pk_profile_budget_take(&b, 1000), 1);
    assert_int_equal(pk_profile_budget_take(&b, 2000), 1);
    assert_int_equal(pk_profile_budget_take(&b, 3000), 0);  /* a third within the minute */
    assert_int_equal(pk_profile_budget_take(&b, 60999), 0); /* the first is 59.999 s old */
    assert_int_equal(pk_profile_budget_take(&b, 61000), 1); /* it left the window */
    assert_int_equal(pk_profile_budget_take(&b, 61500), 0);
    assert_int_equal(b.taken, 3);
    assert_int_equal(b.refused, 3);
    pk_profile_budget_destroy(&b);
    assert_int_equal(pk_profile_budget_init(&b, 0, 30, &err), PK_OK); /* off: never */
    assert_int_equal(pk_profile_budget_take(&b, 0), 0);
    pk_profile_budget_destroy(&b);
    assert_int_equal(pk_profile_budget_init(&b, 601, 30, &err), PK_ERR_INVALID);
    assert_int_equal(pk_profile_budget_init(&b, 1, 0.5, &err), PK_ERR_INVALID);
    assert_int_equal(pk_profile_budget_init(&b, 1, 601, &err), PK_ERR_INVALID);
}

static void test_levels(void **state) {
    (void)state;
    assert_int_equal(pk_profile_level_parse("none"), PK_PROFILE_NONE);
    assert_int_equal(pk_profile_level_parse("summary"), PK_PROFILE_SUMMARY);
    assert_int_equal(pk_profile_level_parse("full"), PK_PROFILE_FULL);
    assert_int_equal(pk_profile_level_parse("Full"), -1);
    assert_int_equal(pk_profile_level_parse(NULL), -1);
    assert_string_equal(pk_profile_level_name(PK_PROFILE_FULL), "full");
}

static void test_metrics_per_level(void **state) {
    (void)state;
    char out[2048];
    int n = pk_profile_ncu_metrics(PK_PROFILE_SUMMARY, NULL, out, sizeof out);
    assert_int_equal(n, 6);
    assert_non_null(strstr(out, "gpu__time_duration.sum"));
    assert_null(strstr(out, "issue_stalled"));
    int full = pk_profile_ncu_metrics(PK_PROFILE_FULL, NULL, out, sizeof out);
    assert_true(full > n);
    assert_non_null(strstr(out, "nvltx__bytes.sum"));
    /* An ncu that lacks some: only those it lists (nvl*, gmma and most stalls drop out). */
    char *query = slurp("ncu_query_metrics.txt");
    n = pk_profile_ncu_metrics(PK_PROFILE_FULL, query, out, sizeof out);
    assert_int_equal(n, 9);
    assert_null(strstr(out, "nvltx"));
    assert_null(strstr(out, "gmma"));
    assert_non_null(strstr(out, "smsp__average_warp_latency_issue_stalled_long_scoreboard.ratio"));
    assert_int_equal(pk_profile_ncu_metrics(PK_PROFILE_FULL, NULL, out, 16), -1); /* too small */
    free(query);
}

/* ncu 2025.3.1 on one H200 listed nvltx/nvlrx but refused them and profiled nothing: the
 * stage recognises its message and asks again without them. */
static void test_nvlink_refused(void **state) {
    (void)state;
    char m[] = "gpu__time_duration.sum,nvltx__bytes.sum,dram__throughput.avg.pct_of_peak_sustained_"
               "elapsed,nvlrx__bytes.sum";
    assert_int_equal(pk_profile_drop_nvlink(m), 2);
    assert_string_equal(m, "gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_"
                           "elapsed");
    char only[] = "nvltx__bytes.sum,nvlrx__bytes.sum";
    assert_int_equal(pk_profile_drop_nvlink(only), 0);
    assert_string_equal(only, "");
    const char *log = "==PROF== Connected to process 597 (/work/k)\n==ERROR== Unable to access "
                      "the following 8 metrics: nvlrx__bytes.avg, nvlrx__bytes.max.\n";
    assert_true(pk_profile_ncu_inaccessible(NULL, log));
    assert_true(pk_profile_ncu_inaccessible("exited (exit 9): ==ERROR== Unable to access the "
                                            "following 2 metrics",
                                            NULL));
    assert_false(pk_profile_ncu_inaccessible("timed out after 90 s", "==PROF== Disconnected"));
}

static void both(pk_profile_data *d) {
    memset(d, 0, sizeof *d);
    d->level = PK_PROFILE_FULL;
    load_traces(d);
    char *text = slurp("ncu_gemm_allreduce_2ranks.csv");
    pk_error err;
    assert_int_equal(pk_profile_ncu_csv_parse(text, d, &err), PK_OK);
    free(text);
}

static void test_summary_and_text(void **state) {
    (void)state;
    pk_profile_data d;
    both(&d);
    pk_profile_summary s = pk_profile_summarize(&d);
    assert_int_equal(s.slowest_rank, 1);
    assert_float_equal(s.slowest_span_ns, 75000, 1e-9);
    assert_string_equal(s.top_kernel, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL");
    assert_float_equal(s.top_share, 40.0 / 75.0, 1e-12); /* of kernels and peer copies */
    assert_string_equal(s.bound, "communication");
    assert_float_equal(s.overlap, 0, 0);
    char *t = pk_profile_feedback_text(&d, 1400);
    assert_non_null(strstr(t, "Profile (full, 2 ranks, one call):"));
    assert_non_null(strstr(t, "- slowest rank: 1, 75.0 us"));
    assert_non_null(strstr(t, "rank 0: 60.0 us"));
    assert_non_null(strstr(t, "dominating kernel: ncclDevKernel_AllReduce_Sum_bf16_RING_LL (53% of "
                              "rank 1's GPU time); bound: communication"));
    assert_non_null(strstr(t, "45.0 us of NCCL kernels and peer copies, 0% of it (0.0 us) "
                              "overlapped with computation"));
    assert_non_null(strstr(t, "NVLink on rank 1, by the kernels ncu profiled (not NCCL's): 8.39 MB "
                              "sent, 8.39 MB received"));
    assert_null(strstr(t, "roofline expects"));
    free(t);
    d.roofline_nvlink_bytes = 33554432; /* pkb/13 at M = N = 4096, W = 2 */
    t = pk_profile_feedback_text(&d, 1400);
    assert_non_null(strstr(t, "8.39 MB received; the roofline expects 33.55 MB sent per rank"));
    assert_true(strlen(t) <= 1400);
    free(t);
    /* A tight budget keeps whole lines only. */
    t = pk_profile_feedback_text(&d, 120);
    assert_true(strlen(t) <= 120);
    assert_int_equal(t[strlen(t) - 1], '\n');
    free(t);
    pk_profile_data_free(&d);
}

/* Without a timeline, ncu's durations rank the kernels and its metrics name the bound. */
static void test_bound_from_metrics(void **state) {
    (void)state;
    char *text = slurp("ncu_base_units.csv");
    pk_profile_data d;
    memset(&d, 0, sizeof d);
    d.level = PK_PROFILE_SUMMARY;
    pk_error err;
    assert_int_equal(pk_profile_ncu_csv_parse(text, &d, &err), PK_OK);
    free(text);
    snprintf(d.trace_error, sizeof d.trace_error, "timed out after 60 s");
    pk_profile_summary s = pk_profile_summarize(&d);
    assert_int_equal(s.slowest_rank, 0);
    assert_string_equal(s.top_kernel, "vector_add");
    assert_string_equal(s.bound, "memory");
    assert_float_equal(s.overlap, -1, 0);
    char *t = pk_profile_feedback_text(&d, 1400);
    assert_non_null(strstr(t, "bound: memory (DRAM 91% of peak, SM 12%, occupancy 88%)"));
    assert_non_null(strstr(t, "- timeline: not recorded (timed out after 60 s)"));
    assert_null(strstr(t, "NVLink")); /* summary level: not a word about it */
    free(t);
    d.kernels[0].dram_pct = 20;
    d.kernels[0].tensor_pct = 75;
    assert_string_equal(pk_profile_summarize(&d).bound, "compute");
    d.kernels[0].tensor_pct = 10;
    d.kernels[0].sm_pct = 12;
    assert_string_equal(pk_profile_summarize(&d).bound, "latency");
    /* Only DRAM read (SM, tensor and FMA pipes unmeasured): not latency, unknown, and the text
     * says which were not measured instead of printing -1%. */
    d.kernels[0].dram_pct = 12;
    d.kernels[0].sm_pct = d.kernels[0].tensor_pct = d.kernels[0].fma_pct = -1;
    assert_string_equal(pk_profile_summarize(&d).bound, "unknown");
    t = pk_profile_feedback_text(&d, 1400);
    assert_non_null(strstr(t, "bound: unknown (DRAM 12% of peak, SM not measured"));
    assert_null(strstr(t, "-1%"));
    free(t);
    pk_profile_data_free(&d);
}

static void test_json_round_trip_and_svg(void **state) {
    (void)state;
    pk_profile_data d, back;
    both(&d);
    snprintf(d.ncu_error, sizeof d.ncu_error, "none");
    d.trace_ok = d.ncu_ok = 1;
    d.roofline_nvlink_bytes = 33554432;
    char *json = pk_profile_data_to_json(&d);
    assert_non_null(json);
    pk_error err;
    assert_int_equal(pk_profile_data_from_json(json, &back, &err), PK_OK);
    assert_int_equal(back.level, PK_PROFILE_FULL);
    assert_int_equal(back.n_iv, d.n_iv);
    assert_int_equal(back.n_kernels, d.n_kernels);
    assert_true(back.nvlink_measured && back.trace_ok && back.ncu_ok);
    assert_float_equal(back.roofline_nvlink_bytes, 33554432, 0);
    assert_string_equal(back.kernels[3].name, "reduce_slice");
    assert_float_equal(back.kernels[3].nvl_rx_bytes, 8.39e6, 1e-3);
    assert_int_equal(back.kernels[0].n_stalls, 3);
    assert_int_equal(back.iv[8].kind, PK_PROF_COMM);
    char *t1 = pk_profile_feedback_text(&d, 1400), *t2 = pk_profile_feedback_text(&back, 1400);
    assert_string_equal(t1, t2); /* the text follows from what the store keeps */
    free(t1);
    free(t2);
    char *svg = pk_profile_svg(&back, "pkb/13 <full>");
    assert_non_null(strstr(svg, "<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert_non_null(strstr(svg, "pkb/13 &lt;full&gt;"));
    int rects = 0;
    for (const char *p = svg; (p = strstr(p, "<rect ")); p++)
        rects++;
    assert_int_equal(rects, d.n_iv);
    assert_non_null(strstr(svg, "fill=\"#ee854a\"")); /* communication */
    assert_non_null(strstr(svg, ">rank 1</text>"));
    /* The fixtures' ranks start 1 ms apart for calls of 60-75 us: clocks that do not agree,
     * so each lane starts at its rank's first operation (rank 1's first box at the left). */
    assert_non_null(strstr(svg, "each rank from its first operation"));
    assert_non_null(strstr(svg, "<rect x=\"70.00\" y=\"66.0\""));
    free(svg);
    /* Clocks that agree (starts 10 us apart): one time axis, rank 1's lane starts later. */
    for (int i = 0; i < back.n_iv; i++)
        if (back.iv[i].rank == 1) {
            back.iv[i].start_ns -= 990000;
            back.iv[i].end_ns -= 990000;
        }
    svg = pk_profile_svg(&back, "shared axis");
    assert_null(strstr(svg, "each rank from its first operation"));
    assert_null(strstr(svg, "<rect x=\"70.00\" y=\"66.0\""));
    free(svg);
    free(json);
    pk_profile_data_free(&back);
    pk_profile_data_free(&d);
    assert_int_equal(pk_profile_data_from_json("[1]", &back, &err), PK_ERR_INVALID);
}

/* ncu's real raw page from an H200 (pkb/13's cuBLAS GEMM, full level, 2026-11-29): 303 columns,
 * ~170 of them device attributes before the metrics. A 256-column cap once cut every sm__
 * column off ("SM -1%"). A row wider than the parser's cap is an error, never a silent cut. */
static void test_ncu_h200_wide_csv(void **state) {
    (void)state;
    char *text = slurp("ncu_h200_gemm_full.csv");
    pk_profile_data d;
    memset(&d, 0, sizeof d);
    d.level = PK_PROFILE_FULL;
    pk_error err;
    assert_int_equal(pk_profile_ncu_csv_parse(text, &d, &err), PK_OK);
    free(text);
    assert_int_equal(d.n_kernels, 1);
    const pk_prof_kernel *k = &d.kernels[0];
    assert_string_equal(k->name, "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT");
    assert_float_equal(k->duration_ns, 29408, 0.5);
    assert_float_equal(k->dram_pct, 11.33, 1e-9);
    assert_float_equal(k->sm_pct, 62.57, 1e-9);
    assert_float_equal(k->tensor_pct, 70.36, 1e-9);
    assert_float_equal(k->fma_pct, 0.19, 1e-9);
    assert_float_equal(k->occupancy_pct, 14.66, 1e-9);
    assert_true(k->n_stalls > 0);
    assert_string_equal(k->stall[0], "long_scoreboard");
    assert_string_equal(pk_profile_summarize(&d).bound, "compute");
    pk_profile_data_free(&d);

    size_t cols = 5000, cap = cols * 4 + 64;
    char *wide = malloc(cap);
    assert_non_null(wide);
    size_t n = (size_t)snprintf(wide, cap, "\"ID\"");
    for (size_t i = 1; i < cols; i++)
        n += (size_t)snprintf(wide + n, cap - n, ",\"c\"");
    snprintf(wide + n, cap - n, "\n");
    memset(&d, 0, sizeof d);
    assert_int_equal(pk_profile_ncu_csv_parse(wide, &d, &err), PK_ERR_INVALID);
    assert_non_null(strstr(err.message, "more than"));
    pk_profile_data_free(&d);
    free(wide);
}

/* The profile stage binds Nsight Compute's directory into the sandbox: found beside the
 * toolkit (through the bin/ncu wrapper, even through a symlinked toolkit root), under the
 * /opt root, or as the frontend's own directory; each real path once; nothing for no ncu. */
static void touch_exec(const char *path) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("#!/bin/sh\n", f);
    fclose(f);
    assert_int_equal(chmod(path, 0755), 0);
}

static void test_ncu_dirs(void **state) {
    (void)state;
    char root[] = "/tmp/pk-ncu-dirs-XXXXXX", p[PATH_MAX], real[PATH_MAX], want[2][PATH_MAX];
    assert_non_null(mkdtemp(root));
    const char *dirs[] = {"cuda-13.0",      "cuda-13.0/bin", "cuda-13.0/nsight-compute-2025.3.1",
                          "cuda-13.0/nvvm", "opt",           "opt/nsight-compute-2024.1"};
    for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) {
        snprintf(p, sizeof p, "%s/%s", root, dirs[i]);
        assert_int_equal(mkdir(p, 0755), 0);
    }
    snprintf(p, sizeof p, "%s/cuda", root);
    assert_int_equal(symlink("cuda-13.0", p), 0);
    snprintf(p, sizeof p, "%s/cuda-13.0/bin/ncu", root);
    touch_exec(p);
    snprintf(p, sizeof p, "%s/cuda-13.0/nsight-compute-2025.3.1/ncu", root);
    touch_exec(p);
    assert_non_null(realpath(root, real));
    snprintf(want[0], PATH_MAX, "%.3000s/cuda-13.0/nsight-compute-2025.3.1", real);
    snprintf(want[1], PATH_MAX, "%.3000s/opt/nsight-compute-2024.1", real);
    char out[4][PATH_MAX], opt[PATH_MAX];
    snprintf(opt, sizeof opt, "%s/opt", root);

    snprintf(p, sizeof p, "%s/cuda/bin/ncu", root);
    assert_int_equal(pk_profile_ncu_dirs(p, opt, out, 4), 2);
    assert_string_equal(out[0], want[0]);
    assert_string_equal(out[1], want[1]);
    assert_int_equal(pk_profile_ncu_dirs(p, opt, out, 1), 1); /* the cap holds */
    assert_string_equal(out[0], want[0]);

    snprintf(p, sizeof p, "%s/cuda-13.0/nsight-compute-2025.3.1/ncu", root);
    assert_int_equal(pk_profile_ncu_dirs(p, opt, out, 4), 2); /* its own dir, once */
    assert_string_equal(out[0], want[0]);

    snprintf(p, sizeof p, "%s/cuda/bin/no-such-ncu", root);
    assert_int_equal(pk_profile_ncu_dirs(p, opt, out, 4), 0);
    assert_int_equal(pk_profile_ncu_dirs(NULL, opt, out, 4), 0);

    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
    assert_int_equal(system(cmd), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_overlap_serialised),
        cmocka_unit_test(test_overlap_two_streams),
        cmocka_unit_test(test_overlap_unions_and_ranks),
        cmocka_unit_test(test_kernel_names),
        cmocka_unit_test(test_ncu_csv_two_processes),
        cmocka_unit_test(test_ncu_csv_base_units_and_na),
        cmocka_unit_test(test_ncu_csv_errors),
        cmocka_unit_test(test_trace_parse),
        cmocka_unit_test(test_budget),
        cmocka_unit_test(test_levels),
        cmocka_unit_test(test_metrics_per_level),
        cmocka_unit_test(test_nvlink_refused),
        cmocka_unit_test(test_summary_and_text),
        cmocka_unit_test(test_bound_from_metrics),
        cmocka_unit_test(test_json_round_trip_and_svg),
        cmocka_unit_test(test_ncu_h200_wide_csv),
        cmocka_unit_test(test_ncu_dirs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
