/* Recursive-descent evaluator for the small expressions of meta.json. */
#include "pk_expr.h"

#include <ctype.h>
#include <limits.h>
#include <string.h>

typedef struct parser {
    const char *text, *p;
    const char *const *names;
    const long long *values;
    int n;
    pk_error *err;
} parser;

static int parse_sum(parser *ps, long long *out);

static void skip_space(parser *ps) {
    while (isspace((unsigned char)*ps->p))
        ps->p++;
}

static int fail(parser *ps, const char *what) {
    return pk_error_set(ps->err, PK_ERR_INVALID, "expression \"%s\": %s at offset %d", ps->text,
                        what, (int)(ps->p - ps->text));
}

static int parse_atom(parser *ps, long long *out) {
    skip_space(ps);
    if (*ps->p == '(') {
        ps->p++;
        if (parse_sum(ps, out))
            return PK_ERR_INVALID;
        skip_space(ps);
        if (*ps->p != ')')
            return fail(ps, "expected ')'");
        ps->p++;
        return PK_OK;
    }
    if (*ps->p == '-') {
        ps->p++;
        long long v;
        if (parse_atom(ps, &v))
            return PK_ERR_INVALID;
        *out = -v;
        return PK_OK;
    }
    if (isdigit((unsigned char)*ps->p)) {
        long long v = 0;
        while (isdigit((unsigned char)*ps->p)) {
            if (__builtin_mul_overflow(v, 10, &v) || __builtin_add_overflow(v, *ps->p - '0', &v))
                return fail(ps, "integer overflow");
            ps->p++;
        }
        *out = v;
        return PK_OK;
    }
    if (isalpha((unsigned char)*ps->p) || *ps->p == '_') {
        const char *start = ps->p;
        while (isalnum((unsigned char)*ps->p) || *ps->p == '_')
            ps->p++;
        size_t len = (size_t)(ps->p - start);
        for (int i = 0; i < ps->n; i++)
            if (strlen(ps->names[i]) == len && strncmp(ps->names[i], start, len) == 0) {
                *out = ps->values[i];
                return PK_OK;
            }
        return pk_error_set(ps->err, PK_ERR_INVALID, "expression \"%s\": unknown name '%.*s'",
                            ps->text, (int)len, start);
    }
    return fail(ps, *ps->p ? "unexpected character" : "unexpected end");
}

static int parse_product(parser *ps, long long *out) {
    if (parse_atom(ps, out))
        return PK_ERR_INVALID;
    for (;;) {
        skip_space(ps);
        char op = *ps->p;
        if (op != '*' && op != '/' && op != '%')
            return PK_OK;
        ps->p++;
        long long rhs;
        if (parse_atom(ps, &rhs))
            return PK_ERR_INVALID;
        if (op == '*') {
            if (__builtin_mul_overflow(*out, rhs, out))
                return fail(ps, "integer overflow");
        } else {
            if (rhs == 0)
                return fail(ps, "division by zero");
            if (*out == LLONG_MIN && rhs == -1)
                return fail(ps, "integer overflow");
            *out = op == '/' ? *out / rhs : *out % rhs;
        }
    }
}

static int parse_sum(parser *ps, long long *out) {
    if (parse_product(ps, out))
        return PK_ERR_INVALID;
    for (;;) {
        skip_space(ps);
        char op = *ps->p;
        if (op != '+' && op != '-')
            return PK_OK;
        ps->p++;
        long long rhs;
        if (parse_product(ps, &rhs))
            return PK_ERR_INVALID;
        int ovf = op == '+' ? __builtin_add_overflow(*out, rhs, out)
                            : __builtin_sub_overflow(*out, rhs, out);
        if (ovf)
            return fail(ps, "integer overflow");
    }
}

/* A comparison (== != < <= > >=) of two sums is 1 or 0: constraints such as "K % world == 0". */
static int parse_compare(parser *ps, long long *out) {
    if (parse_sum(ps, out))
        return PK_ERR_INVALID;
    skip_space(ps);
    static const char *const ops[] = {"==", "!=", "<=", ">=", "<", ">"};
    for (int k = 0; k < 6; k++) {
        size_t len = strlen(ops[k]);
        if (strncmp(ps->p, ops[k], len) != 0)
            continue;
        ps->p += len;
        long long rhs;
        if (parse_sum(ps, &rhs))
            return PK_ERR_INVALID;
        long long a = *out;
        *out = k == 0   ? a == rhs
               : k == 1 ? a != rhs
               : k == 2 ? a <= rhs
               : k == 3 ? a >= rhs
               : k == 4 ? a < rhs
                        : a > rhs;
        return PK_OK;
    }
    return PK_OK;
}

int pk_expr_eval(const char *text, const char *const *names, const long long *values, int n,
                 long long *out, pk_error *err) {
    if (!text || !out)
        return pk_error_set(err, PK_ERR_INVALID, "expression: NULL argument");
    parser ps = {text, text, names, values, n, err};
    long long v;
    if (parse_compare(&ps, &v))
        return PK_ERR_INVALID;
    skip_space(&ps);
    if (*ps.p)
        return fail(&ps, "trailing characters");
    *out = v;
    return PK_OK;
}
