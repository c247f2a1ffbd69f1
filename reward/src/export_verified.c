/* The verified records of `pkgym export` (export_verified.h): the fine-tuning triples of
 * DSL-Monkeys, best first and without the same kernel twice. */
#include "export_verified.h"

#include <stdlib.h>
#include <string.h>

int pk_verified_set_add(pk_verified_set *v, json_t *line, pk_error *err) {
    if (!line)
        return pk_error_set(err, PK_ERR_NOMEM, "export: could not build a JSON record");
    if (!v->lines && !(v->lines = json_array())) {
        json_decref(line);
        return pk_error_set(err, PK_ERR_NOMEM, "export: out of memory");
    }
    const char *code = json_string_value(json_object_get(line, "code"));
    /* The same hash as the archive's (pk_archive_kernel_hash): surrounding whitespace aside. */
    const char *b = code ? code : "", *e = b + strlen(b);
    while (b < e && strchr(" \t\r\n\f\v", *b))
        b++;
    while (e > b && strchr(" \t\r\n\f\v", e[-1]))
        e--;
    char hash[65];
    pk_sha256_hex(b, (size_t)(e - b), hash);
    json_object_set_new(line, "kernel_hash", json_string(hash));
    json_object_set(line, "task", json_object_get(line, "task_prompt"));
    json_object_set(line, "plan", json_object_get(line, "summary"));
    if (json_array_append_new(v->lines, line))
        return pk_error_set(err, PK_ERR_NOMEM, "export: out of memory");
    return PK_OK;
}

typedef struct ranked {
    json_t *line;
    const char *problem, *hash;
    double speedup;
    size_t order;
} ranked;

static int by_problem_then_best(const void *pa, const void *pb) {
    const ranked *a = pa, *b = pb;
    int c = strcmp(a->problem, b->problem);
    if (c)
        return c;
    if (a->speedup != b->speedup)
        return a->speedup > b->speedup ? -1 : 1;
    return a->order < b->order ? -1 : a->order > b->order;
}

/* 1 when an earlier record of the same problem (sorted) has this hash. */
static int seen_before(const ranked *r, size_t i) {
    for (size_t j = i; j-- > 0 && strcmp(r[j].problem, r[i].problem) == 0;)
        if (strcmp(r[j].hash, r[i].hash) == 0)
            return 1;
    return 0;
}

int pk_verified_set_write(pk_verified_set *v, FILE *out, int all_turns, long *written,
                          long *duplicates, pk_error *err) {
    size_t n = json_array_size(v->lines);
    *written = *duplicates = 0;
    ranked *r = calloc(n + 1, sizeof *r);
    if (!r)
        return pk_error_set(err, PK_ERR_NOMEM, "export: out of memory");
    for (size_t i = 0; i < n; i++) {
        json_t *line = json_array_get(v->lines, i);
        const char *problem = json_string_value(json_object_get(line, "problem_id"));
        r[i] = (ranked){.line = line,
                        .problem = problem ? problem : "",
                        .hash = json_string_value(json_object_get(line, "kernel_hash")),
                        .speedup = json_number_value(json_object_get(line, "speedup")),
                        .order = i};
    }
    qsort(r, n, sizeof *r, by_problem_then_best);
    int rc = PK_OK;
    for (size_t i = 0; i < n && !rc; i++) {
        if (!all_turns && seen_before(r, i)) {
            (*duplicates)++;
            continue;
        }
        if (json_dumpf(r[i].line, out, JSON_COMPACT) != 0 || fputc('\n', out) == EOF)
            rc = pk_error_errno(err, PK_ERR_IO, "export: write failed");
        else
            (*written)++;
    }
    free(r);
    return rc;
}

void pk_verified_set_free(pk_verified_set *v) {
    json_decref(v->lines);
    v->lines = NULL;
}
