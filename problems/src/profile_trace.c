/* The parser of the trace files the injection library writes (problems/profiler/
 * pk_cupti_trace.c), one per process: "K|C|M <device> <stream> <start_ns> <end_ns> <name>".
 * Kernel names are kept as their base (pk_profile_kernel_base). K: a kernel (NCCL kernels are
 * communication), C: a peer copy (communication), M: another
 * copy or a memset. Lines starting with '#' are comments. */
#include "pk_profile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int push(pk_profile_data *d, const pk_prof_interval *v, pk_error *err) {
    if (d->n_iv >= PK_PROFILE_MAX_INTERVALS)
        return pk_error_set(err, PK_ERR_INVALID, "trace: more than %d intervals",
                            PK_PROFILE_MAX_INTERVALS);
    if (d->n_iv % 256 == 0) {
        pk_prof_interval *m = realloc(d->iv, (size_t)(d->n_iv + 256) * sizeof *m);
        if (!m)
            return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
        d->iv = m;
    }
    d->iv[d->n_iv++] = *v;
    if (v->rank + 1 > d->world)
        d->world = v->rank + 1;
    return PK_OK;
}

int pk_profile_trace_parse(const char *text, pk_profile_data *d, pk_error *err) {
    if (!text)
        return pk_error_set(err, PK_ERR_INVALID, "trace: no text");
    int line_no = 0;
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char line[512];
        snprintf(line, sizeof line, "%.*s", (int)(len < sizeof line ? len : sizeof line - 1), p);
        p += len + (nl ? 1 : 0);
        line_no++;
        if (!line[0] || line[0] == '#')
            continue;
        pk_prof_interval v;
        memset(&v, 0, sizeof v);
        char kind;
        unsigned long long s, e;
        int used = 0;
        if (sscanf(line, "%c %d %d %llu %llu %n", &kind, &v.rank, &v.stream, &s, &e, &used) < 5 ||
            !strchr("KCM", kind) || v.rank < 0 || v.rank >= 64 || e < s)
            return pk_error_set(err, PK_ERR_INVALID, "trace line %d: malformed: %.80s", line_no,
                                line);
        v.start_ns = (double)s;
        v.end_ns = (double)e;
        if (kind == 'K')
            pk_profile_kernel_base(line + used, v.name, sizeof v.name);
        else
            snprintf(v.name, sizeof v.name, "%.95s", line + used);
        v.kind = kind == 'C'                         ? PK_PROF_COMM
                 : kind == 'M'                       ? PK_PROF_COPY
                 : pk_profile_kernel_is_comm(v.name) ? PK_PROF_COMM
                                                     : PK_PROF_COMPUTE;
        int rc = push(d, &v, err);
        if (rc)
            return rc;
    }
    return PK_OK;
}

void pk_profile_data_free(pk_profile_data *d) {
    free(d->kernels);
    free(d->iv);
    d->kernels = NULL;
    d->iv = NULL;
    d->n_kernels = d->n_iv = 0;
}
