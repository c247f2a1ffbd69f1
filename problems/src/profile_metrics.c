/* The metrics ncu collects at each level (docs/feedback.md, "Profiles"), filtered by what the
 * installed ncu knows (`ncu --query-metrics` lists base names, one a line). Names are those of
 * sm_90 (H100/H200). */
#include "pk_profile.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

static const char *const summary[] = {
    "gpu__time_duration.sum",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
};

static const char *const full[] = {
    "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
    "smsp__average_warp_latency_issue_stalled_long_scoreboard.ratio",
    "smsp__average_warp_latency_issue_stalled_short_scoreboard.ratio",
    "smsp__average_warp_latency_issue_stalled_barrier.ratio",
    "smsp__average_warp_latency_issue_stalled_membar.ratio",
    "smsp__average_warp_latency_issue_stalled_wait.ratio",
    "smsp__average_warp_latency_issue_stalled_math_pipe_throttle.ratio",
    "smsp__average_warp_latency_issue_stalled_mio_throttle.ratio",
    "smsp__average_warp_latency_issue_stalled_lg_throttle.ratio",
    "smsp__average_warp_latency_issue_stalled_not_selected.ratio",
    "smsp__average_warp_latency_issue_stalled_no_instruction.ratio",
    "nvltx__bytes.sum",
    "nvlrx__bytes.sum",
};

/* Whether query lists the base of name (its part before the first '.') as a whole word. */
static int known(const char *query, const char *name) {
    size_t n = strcspn(name, ".");
    for (const char *p = query; *p;) {
        while (*p && !(isalnum((unsigned char)*p) || *p == '_'))
            p++;
        size_t len = 0;
        while (isalnum((unsigned char)p[len]) || p[len] == '_')
            len++;
        if (len == n && !strncmp(p, name, n))
            return 1;
        p += len;
    }
    return 0;
}

int pk_profile_ncu_metrics(int level, const char *query, char *out, size_t cap) {
    size_t used = 0;
    int count = 0;
    out[0] = 0;
    for (int pass = 0; pass < 2; pass++) {
        const char *const *list = pass ? full : summary;
        size_t n = pass ? sizeof full / sizeof *full : sizeof summary / sizeof *summary;
        if (pass && level < PK_PROFILE_FULL)
            break;
        for (size_t i = 0; i < n; i++) {
            if (query && !known(query, list[i]))
                continue;
            int w = snprintf(out + used, cap - used, "%s%s", count ? "," : "", list[i]);
            if (w < 0 || (size_t)w >= cap - used)
                return -1;
            used += (size_t)w;
            count++;
        }
    }
    return count;
}

int pk_profile_ncu_inaccessible(const char *why, const char *log) {
    const char *needle = "Unable to access the following";
    return (why && strstr(why, needle)) || (log && strstr(log, needle));
}

int pk_profile_drop_nvlink(char *metrics) {
    char *w = metrics;
    int kept = 0;
    for (char *r = metrics; *r;) {
        size_t n = strcspn(r, ",");
        int nvl = !strncmp(r, "nvltx__", 7) || !strncmp(r, "nvlrx__", 7);
        if (!nvl && n > 0) {
            if (kept)
                *w++ = ',';
            memmove(w, r, n);
            w += n;
            kept++;
        }
        r += n;
        if (*r == ',')
            r++;
    }
    *w = 0;
    return kept;
}
