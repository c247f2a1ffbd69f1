/* What a profile says to the model: the slowest rank, the kernel that dominates it, the bound
 * that kernel hits, and how much of the rank's communication overlapped with computation. */
#include "pk_profile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HIGH_PCT 60.0 /* a unit at or above this share of its peak bounds the kernel */
#define COMM_SHARE 0.5

/* The kernel time of each name on rank, from the trace (else from ncu's durations). */
typedef struct tally {
    char name[128];
    double ns;
    int comm;
} tally;

static int tally_rank(const pk_profile_data *d, int rank, tally *t, int cap, double *total) {
    int n = 0;
    *total = 0;
    int from_trace = d->n_iv > 0;
    int count = from_trace ? d->n_iv : d->n_kernels;
    for (int i = 0; i < count; i++) {
        const char *name;
        double ns;
        int comm;
        if (from_trace) {
            const pk_prof_interval *v = &d->iv[i];
            if (v->rank != rank || v->kind == PK_PROF_COPY)
                continue;
            name = v->name;
            ns = v->end_ns - v->start_ns;
            comm = v->kind == PK_PROF_COMM;
        } else {
            const pk_prof_kernel *k = &d->kernels[i];
            if (k->rank != rank || k->duration_ns < 0)
                continue;
            name = k->name;
            ns = k->duration_ns;
            comm = pk_profile_kernel_is_comm(name);
        }
        *total += ns;
        int j = 0;
        while (j < n && strncmp(t[j].name, name, sizeof t[j].name - 1))
            j++;
        if (j == n) {
            if (n == cap)
                continue;
            snprintf(t[n].name, sizeof t[n].name, "%s", name);
            t[n].ns = 0;
            t[n].comm = comm;
            n++;
        }
        t[j].ns += ns;
    }
    return n;
}

/* ncu's row for name on rank (the first one), or NULL. */
static const pk_prof_kernel *metrics_of(const pk_profile_data *d, int rank, const char *name) {
    for (int i = 0; i < d->n_kernels; i++)
        if (d->kernels[i].rank == rank &&
            !strncmp(d->kernels[i].name, name, sizeof d->kernels[i].name - 1))
            return &d->kernels[i];
    return NULL;
}

static double pipes(const pk_prof_kernel *k) {
    double v = k->sm_pct;
    if (k->tensor_pct > v)
        v = k->tensor_pct;
    if (k->fma_pct > v)
        v = k->fma_pct;
    return v;
}

pk_profile_summary pk_profile_summarize(const pk_profile_data *d) {
    pk_profile_summary s = {-1, 0, "", 0, "unknown", -1};
    for (int r = 0; r < d->world; r++) {
        double span = 0;
        if (d->n_iv > 0) {
            span = pk_profile_overlap(d->iv, d->n_iv, r).span_ns;
        } else {
            for (int i = 0; i < d->n_kernels; i++)
                if (d->kernels[i].rank == r && d->kernels[i].duration_ns > 0)
                    span += d->kernels[i].duration_ns;
        }
        if (span > s.slowest_span_ns || s.slowest_rank < 0) {
            s.slowest_rank = r;
            s.slowest_span_ns = span;
        }
    }
    if (s.slowest_rank < 0)
        return s;
    tally t[64];
    double total;
    int n = tally_rank(d, s.slowest_rank, t, 64, &total);
    int top = -1;
    for (int i = 0; i < n; i++)
        if (top < 0 || t[i].ns > t[top].ns)
            top = i;
    pk_prof_overlap o = d->n_iv ? pk_profile_overlap(d->iv, d->n_iv, s.slowest_rank)
                                : (pk_prof_overlap){0, 0, 0, 0, -1};
    s.overlap = o.fraction;
    if (top < 0)
        return s;
    snprintf(s.top_kernel, sizeof s.top_kernel, "%s", t[top].name);
    s.top_share = total > 0 ? t[top].ns / total : 0;
    /* Communication bounds the call when it is most of the call and computation did not hide
     * it; else the dominating compute kernel's busiest unit says. */
    if (o.span_ns > 0 && o.comm_ns - o.overlap_ns >= COMM_SHARE * o.span_ns)
        s.bound = "communication";
    else if (t[top].comm)
        s.bound = "communication";
    else {
        const pk_prof_kernel *k = metrics_of(d, s.slowest_rank, t[top].name);
        if (k && k->dram_pct >= HIGH_PCT && k->dram_pct >= pipes(k))
            s.bound = "memory";
        else if (k && pipes(k) >= HIGH_PCT)
            s.bound = "compute";
        /* Latency only when both sides were read and both are low: with the pipes unread (an
         * ncu that knows DRAM but not SM metrics, seen on an H200), a GEMM at 12% DRAM is not
         * latency-bound, it is unknown. */
        else if (k && k->dram_pct >= 0 && pipes(k) >= 0)
            s.bound = "latency";
    }
    return s;
}

/* A percentage ncu measured, or "not measured" (the parsers keep -1 for a metric it lacked). */
static void pct(char *out, size_t cap, double v) {
    if (v >= 0)
        snprintf(out, cap, "%.0f%%", v);
    else
        snprintf(out, cap, "not measured");
}

static void us(char *out, size_t cap, double ns) {
    snprintf(out, cap, "%.1f us", ns / 1e3);
}

/* Names are bases already (the parsers keep them so); long ones are cut. */
static void short_name(const char *name, char *out, size_t cap) {
    snprintf(out, cap, "%.60s", name);
}

static void add(pk_strbuf *b, size_t max_chars, const char *line) {
    if (b->len + strlen(line) + 1 <= max_chars)
        pk_strbuf_printf(b, "%s\n", line);
}

char *pk_profile_feedback_text(const pk_profile_data *d, size_t max_chars) {
    pk_profile_summary s = pk_profile_summarize(d);
    pk_strbuf b = {0};
    char line[512], a[32], top[64];
    snprintf(line, sizeof line,
             "Profile (%s, %d rank%s, one call):", pk_profile_level_name(d->level), d->world,
             d->world == 1 ? "" : "s");
    add(&b, max_chars, line);
    if (s.slowest_rank < 0) {
        add(&b, max_chars, "- nothing was recorded (no kernel ran in the profiled call)");
        return b.data ? b.data : strdup("");
    }
    us(a, sizeof a, s.slowest_span_ns);
    int n = snprintf(line, sizeof line, "- slowest rank: %d, %s %s", s.slowest_rank, a,
                     d->n_iv ? "from its first to its last GPU operation" : "of kernel time");
    for (int r = 0; r < d->world && r < 8 && d->n_iv; r++) {
        if (r == s.slowest_rank)
            continue;
        us(a, sizeof a, pk_profile_overlap(d->iv, d->n_iv, r).span_ns);
        n += snprintf(line + n, sizeof line - (size_t)n, "%s rank %d: %s",
                      n > 0 && strchr(line, ';') ? "," : ";", r, a);
        if ((size_t)n >= sizeof line)
            break;
    }
    add(&b, max_chars, line);
    short_name(s.top_kernel, top, sizeof top);
    n = snprintf(line, sizeof line,
                 "- dominating kernel: %s (%.0f%% of rank %d's GPU time); bound: %s", top,
                 100 * s.top_share, s.slowest_rank, s.bound);
    const pk_prof_kernel *k = metrics_of(d, s.slowest_rank, s.top_kernel);
    if (k && (size_t)n < sizeof line) {
        char dram[16], sm[16];
        pct(dram, sizeof dram, k->dram_pct);
        pct(sm, sizeof sm, k->sm_pct);
        n += snprintf(line + n, sizeof line - (size_t)n, " (DRAM %s of peak, SM %s", dram, sm);
        if (k->tensor_pct >= 0 && (size_t)n < sizeof line)
            n += snprintf(line + n, sizeof line - (size_t)n, ", tensor pipe %.0f%%", k->tensor_pct);
        if (k->fma_pct >= 0 && (size_t)n < sizeof line)
            n += snprintf(line + n, sizeof line - (size_t)n, ", FMA pipe %.0f%%", k->fma_pct);
        if (k->occupancy_pct >= 0 && (size_t)n < sizeof line)
            n +=
                snprintf(line + n, sizeof line - (size_t)n, ", occupancy %.0f%%", k->occupancy_pct);
        if ((size_t)n < sizeof line)
            n += snprintf(line + n, sizeof line - (size_t)n, ")");
    }
    add(&b, max_chars, line);
    if (k && k->n_stalls > 0) {
        n = snprintf(line, sizeof line,
                     "- top stalls of that kernel (cycles per issued instruction):");
        for (int i = 0; i < k->n_stalls && (size_t)n < sizeof line; i++)
            n += snprintf(line + n, sizeof line - (size_t)n, "%s %s %.1f", i ? "," : "",
                          k->stall[i], k->stall_val[i]);
        add(&b, max_chars, line);
    }
    if (d->n_iv) {
        pk_prof_overlap o = pk_profile_overlap(d->iv, d->n_iv, s.slowest_rank);
        if (o.fraction < 0) {
            add(&b, max_chars, "- communication: no NCCL kernel or peer copy on that rank");
        } else {
            char c[32], v[32];
            us(c, sizeof c, o.comm_ns);
            us(v, sizeof v, o.overlap_ns);
            snprintf(line, sizeof line,
                     "- communication: %s of NCCL kernels and peer copies, %.0f%% of it (%s) "
                     "overlapped with computation",
                     c, 100 * o.fraction, v);
            add(&b, max_chars, line);
        }
    } else if (d->trace_error[0]) {
        snprintf(line, sizeof line, "- timeline: not recorded (%s)", d->trace_error);
        add(&b, max_chars, line);
    }
    if (d->level >= PK_PROFILE_FULL) {
        if (d->nvlink_measured) {
            double tx = 0, rx = 0;
            for (int i = 0; i < d->n_kernels; i++)
                if (d->kernels[i].rank == s.slowest_rank) {
                    tx += d->kernels[i].nvl_tx_bytes > 0 ? d->kernels[i].nvl_tx_bytes : 0;
                    rx += d->kernels[i].nvl_rx_bytes > 0 ? d->kernels[i].nvl_rx_bytes : 0;
                }
            int n2 = snprintf(line, sizeof line,
                              "- NVLink on rank %d, by the kernels ncu profiled (not NCCL's): "
                              "%.2f MB sent, %.2f MB received",
                              s.slowest_rank, tx / 1e6, rx / 1e6);
            if (d->roofline_nvlink_bytes > 0 && (size_t)n2 < sizeof line)
                snprintf(line + n2, sizeof line - (size_t)n2,
                         "; the roofline expects %.2f MB sent per rank",
                         d->roofline_nvlink_bytes / 1e6);
        } else {
            snprintf(line, sizeof line, "- NVLink traffic: not measured (%s)",
                     d->nvlink_inaccessible ? "ncu may not read the NVLink counters here"
                                            : "this ncu has no nvltx/nvlrx metrics");
        }
        add(&b, max_chars, line);
    }
    if (d->ncu_error[0]) {
        snprintf(line, sizeof line, "- kernel metrics: %s (%s)",
                 d->ncu_ok ? "incomplete" : "not measured", d->ncu_error);
        add(&b, max_chars, line);
    }
    return b.data ? b.data : strdup("");
}
