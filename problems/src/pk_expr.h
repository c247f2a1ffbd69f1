/* Internal: integer arithmetic expressions over named variables (meta.json counts, roofline). */
#ifndef PK_EXPR_H
#define PK_EXPR_H

#include "pk_common.h"

/* Evaluates `text` (integers, names, + - * / % parentheses, unary minus, and at most one
 * comparison == != < <= > >= giving 1 or 0) with 64-bit overflow and division-by-zero checks.
 * Unknown names are errors naming the name. */
int pk_expr_eval(const char *text, const char *const *names, const long long *values, int n,
                 long long *out, pk_error *err);

#endif
