/* pk_eval_result lifecycle and evaluation options. */
#include "pk_harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void pk_eval_result_init(pk_eval_result *r) {
    memset(r, 0, sizeof *r);
    r->status = PK_STATUS_RUNTIME_ERROR; /* until a stage says otherwise */
}

void pk_eval_result_free(pk_eval_result *r) {
    free(r->compile_log);
    free(r->stdout_tail);
    free(r->stderr_tail);
    r->compile_log = r->stdout_tail = r->stderr_tail = NULL;
    free(r->profile.text);
    free(r->profile.raw);
    r->profile.text = r->profile.raw = NULL;
}

int pk_eval_result_add_check(pk_eval_result *r, const char *name, int passed, const char *fmt,
                             ...) {
    if (r->n_checks >= PK_EVAL_MAX_CHECKS)
        return -1;
    pk_check_result *c = &r->checks[r->n_checks];
    snprintf(c->name, sizeof c->name, "%s", name);
    c->passed = passed;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->detail, sizeof c->detail, fmt, ap);
    va_end(ap);
    return r->n_checks++;
}

void pk_eval_opts_default(pk_eval_opts *o) {
    memset(o, 0, sizeof *o);
}
