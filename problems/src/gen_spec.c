/* Input generators of meta.json ("gen" of an argument) and per-argument tolerances. */
#include "pk_problem_spec.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int pk_dtype_is_integer(pk_dtype t) {
    return t == PK_DTYPE_I32 || t == PK_DTYPE_I64 || t == PK_DTYPE_I8 || t == PK_DTYPE_U8;
}

void pk_gen_default(pk_dtype dtype, pk_gen_spec *out) {
    memset(out, 0, sizeof *out);
    if (pk_dtype_is_integer(dtype)) {
        out->kind = PK_GEN_INT;
        strcpy(out->lo, dtype == PK_DTYPE_U8 ? "0" : "-16");
        strcpy(out->hi, "16");
        out->regimes = 1u << PK_REGIME_IID;
    } else {
        out->kind = PK_GEN_NORMAL;
        out->b = 1.0;
        out->regimes = PK_REGIMES_DEFAULT;
    }
}

static const char *const regime_names[PK_REGIME_COUNT] = {"iid",   "rank",   "row",
                                                          "heavy", "peaked", "cancel"};

const char *pk_regime_name(pk_regime r) {
    return (unsigned)r < PK_REGIME_COUNT ? regime_names[r] : "?";
}

int pk_regime_from_name(const char *name) {
    for (int r = 0; r < PK_REGIME_COUNT; r++)
        if (strcmp(name, regime_names[r]) == 0)
            return r;
    return -1;
}

/* By the tolerance rule (docs/problems.md) each implementation is within a quarter of the
 * element-wise tolerance of fp64 at every element, so two of them differ by at most half of it
 * in norm too; a problem whose calibration measured its norm-wise errors sets a tighter one. */
double pk_arg_norm_rtol(const pk_problem *p, int i) {
    const pk_arg_spec *a = &p->args[i];
    if (a->checker != PK_CHECKER_ALLCLOSE && a->checker != PK_CHECKER_BUDGET)
        return 0;
    if (a->norm_rtol >= 0)
        return a->norm_rtol;
    double atol, rtol;
    pk_arg_tolerance(p, i, &atol, &rtol);
    return (rtol > a->atol_rms ? rtol : a->atol_rms) / 2;
}

/* Splits "name(a, b)" into name and up to two trimmed arguments; returns the count, or -1. */
static int split_call(const char *text, char *name, size_t name_cap, char args[2][64]) {
    const char *open = strchr(text, '(');
    size_t n = open ? (size_t)(open - text) : strlen(text);
    while (n && isspace((unsigned char)text[n - 1]))
        n--;
    if (n == 0 || n >= name_cap)
        return -1;
    memcpy(name, text, n);
    name[n] = 0;
    if (!open) {
        for (const char *c = text + n; *c; c++)
            if (!isspace((unsigned char)*c))
                return -1;
        return 0;
    }
    const char *close = strrchr(open, ')');
    if (!close)
        return -1;
    for (const char *c = close + 1; *c; c++)
        if (!isspace((unsigned char)*c))
            return -1;
    int count = 0, depth = 0;
    const char *start = open + 1;
    for (const char *c = open + 1; c <= close; c++) {
        if (*c == '(')
            depth++;
        else if (*c == ')' && depth > 0)
            depth--;
        else if ((*c == ',' && depth == 0) || c == close) {
            while (start < c && isspace((unsigned char)*start))
                start++;
            size_t len = (size_t)(c - start);
            while (len && isspace((unsigned char)start[len - 1]))
                len--;
            if (count == 2 || len == 0 || len >= 64)
                return -1;
            memcpy(args[count], start, len);
            args[count++][len] = 0;
            start = c + 1;
        }
    }
    return count;
}

static int number(const char *s, double *out) {
    char *end;
    *out = strtod(s, &end);
    return end != s && *end == 0;
}

int pk_gen_parse(const char *text, pk_dtype dtype, pk_gen_spec *out, pk_error *err) {
    char name[16], args[2][64] = {"", ""};
    int n = split_call(text, name, sizeof name, args);
    memset(out, 0, sizeof *out);
    int integer = pk_dtype_is_integer(dtype);
    if (n < 0)
        return pk_error_set(err, PK_ERR_INVALID, "generator \"%s\": expected name(args)", text);
    out->regimes = 1u << PK_REGIME_IID; /* lattice, int, index: their values as they are */
    if (strcmp(name, "lattice") == 0 && n == 0) {
        out->kind = PK_GEN_LATTICE;
        return PK_OK;
    }
    if ((strcmp(name, "normal") == 0 || strcmp(name, "uniform") == 0) && n == 2) {
        out->kind = name[0] == 'n' ? PK_GEN_NORMAL : PK_GEN_UNIFORM;
        if (integer)
            return pk_error_set(err, PK_ERR_INVALID, "generator %s needs a floating dtype", name);
        if (!number(args[0], &out->a) || !number(args[1], &out->b))
            return pk_error_set(err, PK_ERR_INVALID, "generator \"%s\": arguments are numbers",
                                text);
        if (out->kind == PK_GEN_NORMAL ? out->b <= 0 : out->b <= out->a)
            return pk_error_set(err, PK_ERR_INVALID, "generator \"%s\": empty distribution", text);
        out->regimes = PK_REGIMES_DEFAULT;
        return PK_OK;
    }
    if ((strcmp(name, "int") == 0 && n == 2) || (strcmp(name, "index") == 0 && n == 1)) {
        if (!integer)
            return pk_error_set(err, PK_ERR_INVALID, "generator %s needs an integer dtype", name);
        out->kind = name[1] == 'n' && name[2] == 't' ? PK_GEN_INT : PK_GEN_INDEX;
        if (out->kind == PK_GEN_INT) {
            strcpy(out->lo, args[0]);
            strcpy(out->hi, args[1]);
        } else {
            strcpy(out->lo, "0");
            strcpy(out->hi, args[0]);
        }
        return PK_OK;
    }
    return pk_error_set(err, PK_ERR_INVALID,
                        "generator \"%s\": use normal(mean, std), uniform(lo, hi), lattice, "
                        "int(lo, hi) or index(n)",
                        text);
}

void pk_arg_tolerance(const pk_problem *p, int i, double *atol, double *rtol) {
    const pk_arg_spec *a = &p->args[i];
    if (a->atol >= 0) {
        *atol = a->atol;
        *rtol = a->rtol;
    } else if (p->atol >= 0) {
        *atol = p->atol;
        *rtol = p->rtol;
    } else {
        pk_dtype_tolerance(a->dtype, atol, rtol);
    }
}
