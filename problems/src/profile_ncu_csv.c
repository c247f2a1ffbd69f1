/* The parser of Nsight Compute's CSV log (ncu --csv --page raw --log-file F): a header row of
 * quoted column names ("ID","Process ID",...,"Kernel Name",...,"Device",...,metric names), a
 * units row, then one row per profiled kernel. Lines that are not CSV ("==PROF==", "==WARNING==",
 * the program's own output) are skipped; a second header row (another process) starts over. */
#include "pk_profile.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ncu's raw page puts ~170 device__attribute columns before the metrics (303 columns on an
 * H200 with the full level's metrics): 256 cut off every sm__ column there. */
#define MAX_COLS 4096

/* Splits one CSV line (quoted fields, "" for a quote) in place; returns the field count, or -1
 * when the line has more than cap fields. */
static int split_csv(char *line, char **f, int cap) {
    int n = 0;
    char *p = line;
    while (*p && n < cap) {
        char *out = p, *start = p;
        if (*p == '"') {
            p++;
            start = out = p;
            while (*p) {
                if (*p == '"' && p[1] == '"') {
                    *out++ = '"';
                    p += 2;
                } else if (*p == '"') {
                    p++;
                    break;
                } else {
                    *out++ = *p++;
                }
            }
            while (*p && *p != ',')
                p++;
        } else {
            while (*p && *p != ',')
                p++;
            out = p;
        }
        char end = *p;
        *out = 0;
        f[n++] = start;
        if (!end)
            break;
        p++;
        if (!*p) { /* a trailing comma: one more, empty field */
            if (n < cap)
                f[n++] = p;
            break;
        }
    }
    return *p && n == cap ? -1 : n; /* more fields than cap: never a silent cut */
}

/* "12,345.6" -> 12345.6; "n/a", "" or text -> -1. */
static double number(const char *s) {
    char buf[64];
    size_t k = 0;
    for (; *s && k + 1 < sizeof buf; s++)
        if (*s != ',' && !isspace((unsigned char)*s))
            buf[k++] = *s;
    buf[k] = 0;
    char *end;
    double v = strtod(buf, &end);
    return k == 0 || *end ? -1 : v;
}

static double unit_scale(const char *u) {
    static const struct {
        const char *name;
        double scale;
    } units[] = {{"nsecond", 1},  {"usecond", 1e3}, {"msecond", 1e6}, {"second", 1e9},
                 {"byte", 1},     {"Kbyte", 1e3},   {"Mbyte", 1e6},   {"Gbyte", 1e9},
                 {"Tbyte", 1e12}, {"KB", 1e3},      {"MB", 1e6},      {"GB", 1e9}};
    for (size_t i = 0; i < sizeof units / sizeof *units; i++)
        if (!strcmp(u, units[i].name))
            return units[i].scale;
    return 1;
}

enum col_role {
    COL_OTHER,
    COL_NAME,
    COL_DEVICE,
    COL_DURATION,
    COL_DRAM,
    COL_SM,
    COL_TENSOR,
    COL_FMA,
    COL_OCCUPANCY,
    COL_NVL_TX,
    COL_NVL_RX,
    COL_STALL
};

static int starts(const char *s, const char *prefix) {
    return !strncmp(s, prefix, strlen(prefix));
}

/* ncu's raw page gives every requested metric's .avg, .max, .min and .sum roll-ups: the one we
 * asked for (profile_metrics.c) is kept; a bare name (no roll-up) too. */
static int rollup(const char *h, const char *want) {
    const char *dot = strchr(h, '.');
    size_t n = strlen(want);
    return !dot || (!strncmp(dot + 1, want, n) && (dot[1 + n] == '.' || !dot[1 + n]));
}

static int role_of(const char *h) {
    if (!strcmp(h, "Kernel Name") || !strcmp(h, "Function Name") || !strcmp(h, "Demangled Name"))
        return COL_NAME;
    if (!strcmp(h, "Device"))
        return COL_DEVICE;
    if (starts(h, "gpu__time_duration") && rollup(h, "sum"))
        return COL_DURATION;
    if (starts(h, "dram__throughput.") && rollup(h, "avg") && strstr(h, "pct_of_peak"))
        return COL_DRAM;
    if (starts(h, "sm__throughput.") && rollup(h, "avg") && strstr(h, "pct_of_peak"))
        return COL_SM;
    if (starts(h, "sm__pipe_tensor") && rollup(h, "avg") && strstr(h, "pct_of_peak"))
        return COL_TENSOR;
    if (starts(h, "sm__pipe_fma") && rollup(h, "avg") && strstr(h, "pct_of_peak"))
        return COL_FMA;
    if (starts(h, "sm__warps_active") && rollup(h, "avg") && strstr(h, "pct_of_peak"))
        return COL_OCCUPANCY;
    if (starts(h, "nvltx__bytes") && rollup(h, "sum"))
        return COL_NVL_TX;
    if (starts(h, "nvlrx__bytes") && rollup(h, "sum"))
        return COL_NVL_RX;
    if (strstr(h, "issue_stalled_"))
        return COL_STALL;
    return COL_OTHER;
}

/* "smsp__average_warp_latency_issue_stalled_long_scoreboard.ratio" -> "long_scoreboard". */
static void stall_name(const char *h, char *out, size_t cap) {
    const char *s = strstr(h, "issue_stalled_") + strlen("issue_stalled_");
    size_t n = strcspn(s, ".");
    const char *per = strstr(s, "_per_");
    if (per && (size_t)(per - s) < n)
        n = (size_t)(per - s);
    if (n >= cap)
        n = cap - 1;
    memcpy(out, s, n);
    out[n] = 0;
}

static void add_stall(pk_prof_kernel *k, const char *name, double v) {
    if (v <= 0)
        return;
    int at = k->n_stalls;
    while (at > 0 && k->stall_val[at - 1] < v)
        at--;
    if (at >= PK_PROF_STALLS)
        return;
    int last = k->n_stalls < PK_PROF_STALLS ? k->n_stalls : PK_PROF_STALLS - 1;
    for (int i = last; i > at; i--) {
        k->stall_val[i] = k->stall_val[i - 1];
        memcpy(k->stall[i], k->stall[i - 1], sizeof k->stall[i]);
    }
    k->stall_val[at] = v;
    snprintf(k->stall[at], sizeof k->stall[at], "%s", name);
    if (k->n_stalls < PK_PROF_STALLS)
        k->n_stalls++;
}

typedef struct header {
    int n;
    int role[MAX_COLS];
    char stall[MAX_COLS][40];
    double scale[MAX_COLS];
    int have_units, nvl;
} header;

static int push_kernel(pk_profile_data *d, const pk_prof_kernel *k, pk_error *err) {
    if (d->n_kernels >= PK_PROFILE_MAX_KERNELS)
        return pk_error_set(err, PK_ERR_INVALID, "ncu CSV: more than %d kernels",
                            PK_PROFILE_MAX_KERNELS);
    if (d->n_kernels % 64 == 0) {
        pk_prof_kernel *m = realloc(d->kernels, (size_t)(d->n_kernels + 64) * sizeof *m);
        if (!m)
            return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
        d->kernels = m;
    }
    d->kernels[d->n_kernels++] = *k;
    if (k->rank + 1 > d->world)
        d->world = k->rank + 1;
    return PK_OK;
}

static int row(pk_profile_data *d, const header *h, char **f, int n, pk_error *err) {
    pk_prof_kernel k;
    memset(&k, 0, sizeof k);
    k.duration_ns = k.dram_pct = k.sm_pct = k.tensor_pct = k.fma_pct = k.occupancy_pct = -1;
    k.nvl_tx_bytes = k.nvl_rx_bytes = -1;
    int named = 0;
    for (int i = 0; i < n && i < h->n; i++) {
        double v = h->role[i] == COL_NAME ? 0 : number(f[i]);
        double s = v >= 0 ? v * h->scale[i] : -1;
        switch (h->role[i]) {
        case COL_NAME:
            pk_profile_kernel_base(f[i], k.name, sizeof k.name);
            named = 1;
            break;
        case COL_DEVICE:
            k.rank = v >= 0 ? (int)v : 0;
            break;
        case COL_DURATION:
            k.duration_ns = s;
            break;
        case COL_DRAM:
            k.dram_pct = v;
            break;
        case COL_SM:
            k.sm_pct = v;
            break;
        case COL_TENSOR: /* hmma and gmma pipes: the busier one */
            if (v > k.tensor_pct)
                k.tensor_pct = v;
            break;
        case COL_FMA:
            if (v > k.fma_pct)
                k.fma_pct = v;
            break;
        case COL_OCCUPANCY:
            k.occupancy_pct = v;
            break;
        case COL_NVL_TX:
            k.nvl_tx_bytes = s;
            break;
        case COL_NVL_RX:
            k.nvl_rx_bytes = s;
            break;
        case COL_STALL:
            add_stall(&k, h->stall[i], v);
            break;
        default:
            break;
        }
    }
    if (!named)
        return pk_error_set(err, PK_ERR_INVALID, "ncu CSV: a row without a kernel name");
    return push_kernel(d, &k, err);
}

int pk_profile_ncu_csv_parse(const char *text, pk_profile_data *d, pk_error *err) {
    if (!text)
        return pk_error_set(err, PK_ERR_INVALID, "ncu CSV: no text");
    char *copy = strdup(text);
    char **f = malloc(MAX_COLS * sizeof *f);
    header *h = calloc(1, sizeof *h);
    if (!copy || !f || !h) {
        free(copy);
        free(f);
        free(h);
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    }
    int rc = PK_OK, headers = 0;
    char *save = NULL;
    for (char *line = strtok_r(copy, "\n", &save); line && !rc;
         line = strtok_r(NULL, "\n", &save)) {
        size_t len = strlen(line);
        if (len && line[len - 1] == '\r')
            line[len - 1] = 0;
        if (line[0] != '"')
            continue; /* ==PROF== lines, the program's output */
        int n = split_csv(line, f, MAX_COLS);
        if (n < 0) {
            rc = pk_error_set(err, PK_ERR_INVALID, "ncu CSV: a row of more than %d columns",
                              MAX_COLS);
            break;
        }
        if (n > 0 && !strcmp(f[0], "ID")) {
            memset(h, 0, sizeof *h);
            h->n = n;
            for (int i = 0; i < n; i++) {
                h->role[i] = role_of(f[i]);
                h->scale[i] = 1;
                if (h->role[i] == COL_STALL)
                    stall_name(f[i], h->stall[i], sizeof h->stall[i]);
                if (h->role[i] == COL_NVL_TX || h->role[i] == COL_NVL_RX)
                    h->nvl = 1;
            }
            headers++;
            continue;
        }
        if (!headers)
            continue;
        if (n > 0 && !f[0][0] && !h->have_units) { /* the units row */
            for (int i = 0; i < n && i < h->n; i++)
                h->scale[i] = unit_scale(f[i]);
            h->have_units = 1;
            continue;
        }
        rc = row(d, h, f, n, err);
        if (!rc && h->nvl)
            d->nvlink_measured = 1;
    }
    if (!rc && !headers)
        rc = pk_error_set(err, PK_ERR_INVALID, "ncu CSV: no header row (no kernel was profiled)");
    free(copy);
    free(f);
    free(h);
    return rc;
}
