/* Evaluates a problem's size expressions at one world size. */
#include "pk_expr.h"
#include "pk_problem_spec.h"

#include <string.h>

static int eval_opt(const char *expr, const char *const *names, const long long *vals, int n,
                    double *out, pk_error *err) {
    long long v = 0;
    if (expr[0] && pk_expr_eval(expr, names, vals, n, &v, err))
        return PK_ERR_INVALID;
    *out = (double)v;
    return PK_OK;
}

int pk_problem_sizes_at(const pk_problem *p, int world, pk_problem_sizes *out, pk_error *err) {
    memset(out, 0, sizeof *out);
    /* The diagnostic world too: job.c admits it only for the reference. */
    if (!pk_problem_world_admitted(p, world, 1))
        return pk_error_set(err, PK_ERR_INVALID, "%s: world size %d is not allowed", p->id, world);
    out->world = world;
    const char *names[PK_MAX_DIMS + 1] = {"world"};
    long long vals[PK_MAX_DIMS + 1] = {world};
    int n = 1;
    for (int i = 0; i < p->n_dims; i++) {
        if (pk_expr_eval(p->dim_exprs[i], names, vals, n, &out->dims[i], err))
            return PK_ERR_INVALID;
        names[n] = p->dim_names[i];
        vals[n++] = out->dims[i];
    }
    for (int i = 0; i < p->constraints.n; i++) {
        long long ok = 0;
        if (pk_expr_eval(p->constraints.items[i], names, vals, n, &ok, err))
            return PK_ERR_INVALID;
        if (!ok)
            return pk_error_set(err, PK_ERR_INVALID, "%s: constraint \"%s\" fails at world size %d",
                                p->id, p->constraints.items[i], world);
    }
    for (int i = 0; i < p->n_args; i++) {
        long long c;
        if (pk_expr_eval(p->args[i].count, names, vals, n, &c, err))
            return PK_ERR_INVALID;
        if (c < 0)
            return pk_error_set(err, PK_ERR_INVALID, "%s: arg %s has a negative count", p->id,
                                p->args[i].name);
        out->counts[i] = (size_t)c;
        const pk_gen_spec *g = &p->args[i].gen;
        out->row_len[i] = c > 0 ? c : 1;
        if (g->row[0] && pk_expr_eval(g->row, names, vals, n, &out->row_len[i], err))
            return PK_ERR_INVALID;
        if (out->row_len[i] < 1)
            return pk_error_set(err, PK_ERR_INVALID, "%s: arg %s: row must be >= 1", p->id,
                                p->args[i].name);
        if (g->kind != PK_GEN_INT && g->kind != PK_GEN_INDEX)
            continue;
        if (pk_expr_eval(g->lo, names, vals, n, &out->gen_lo[i], err) ||
            pk_expr_eval(g->hi, names, vals, n, &out->gen_hi[i], err))
            return PK_ERR_INVALID;
        long long span_hi = g->kind == PK_GEN_INDEX ? out->gen_hi[i] - 1 : out->gen_hi[i];
        if (span_hi < out->gen_lo[i])
            return pk_error_set(err, PK_ERR_INVALID, "%s: arg %s: generator range is empty", p->id,
                                p->args[i].name);
    }
    for (int i = 0; i < p->n_phases; i++) {
        const pk_phase_spec *ph = &p->phases[i];
        if (eval_opt(ph->flops, names, vals, n, &out->flops[i], err) ||
            eval_opt(ph->hbm_bytes, names, vals, n, &out->hbm_bytes[i], err) ||
            eval_opt(ph->nvlink_bytes, names, vals, n, &out->nvlink_bytes[i], err))
            return PK_ERR_INVALID;
        /* One rank has no peer: nothing crosses NVLink, whatever the formula (broadcast's
         * "2*n" does not vanish at W = 1), or the diagnostic world's floor would reject the
         * reference itself. */
        if (world == 1)
            out->nvlink_bytes[i] = 0;
    }
    return PK_OK;
}
