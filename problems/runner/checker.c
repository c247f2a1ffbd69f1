/* Judges one output of one call by its argument's checker (meta.json "checker"): allclose
 * (with atol_rms scaled by the reference output's RMS), exact, budget (a share of elements may
 * miss by at most max_ulp representable values: quantization rounding flips), or the problem
 * module's own check() (outputs that are not unique, such as top-k with ties); allclose and
 * budget outputs are also checked norm-wise (pk_arg_norm_rtol). */
#include "pk_runner.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

int rn_check_output(rank_state *rs, int i, const void *got, const void *want, size_t n,
                    const pk_problem_call *want_call, const pk_problem_call *got_call,
                    rn_verdict *v) {
    const pk_arg_spec *a = &rs->p->args[i];
    memset(v, 0, sizeof *v);
    v->index = -1;
    if (a->checker == PK_CHECKER_CUSTOM) {
        if (rs->mod->abi_version < 2 || !rs->mod->check) {
            snprintf(rs->b.error, sizeof rs->b.error,
                     "output %s has a custom checker, but the problem module has no check()",
                     a->name);
            return -1;
        }
        pk_check_report r;
        memset(&r, 0, sizeof r);
        r.bad_index = -1;
        if (rs->mod->check(want_call, got_call, i, &r)) {
            snprintf(rs->b.error, sizeof rs->b.error, "the problem's check() of %s failed",
                     a->name);
            return -1;
        }
        *v = (rn_verdict){!r.passed, r.passed ? -1 : r.bad_index, r.expected, r.got, r.max_abs,
                          r.max_rel};
        return 0;
    }
    double atol = 0, rtol = 0;
    if (a->checker != PK_CHECKER_EXACT)
        pk_arg_tolerance(rs->p, i, &atol, &rtol);
    if (a->atol_rms > 0) { /* the reference's whole output sets the scale */
        double rms = 0;
        if (rs->b.rms(&rs->b, rs->ref_out[i], a->dtype, rs->sz.counts[i], &rms))
            return -1;
        atol += a->atol_rms * rms;
    }
    rn_compare c;
    if (rs->b.compare(&rs->b, got, want, a->dtype, n, atol, rtol, &c))
        return -1;
    v->max_abs = c.max_abs;
    v->max_rel = c.max_rel;
    int bad = c.bad_index >= 0;
    if (bad && a->checker == PK_CHECKER_BUDGET)
        bad = c.n_bad > (long long)floor(a->budget * (double)n) ||
              c.max_ulp > (unsigned long long)a->max_ulp;
    if (bad) {
        v->bad = 1;
        v->index = c.bad_index;
        v->expected = c.expected;
        v->got = c.got;
        return 0;
    }
    /* Norm-wise: elements each within their tolerance can still share one bias (a loss or a
     * scale off by a few per cent everywhere), which the whole output's norm shows. Elements
     * near zero, where the absolute tolerance is the larger part, are left out (c.err_sq). */
    double norm_rtol = pk_arg_norm_rtol(rs->p, i);
    double err = sqrt(c.err_sq), ref = sqrt(c.want_sq);
    if (norm_rtol > 0 && !(err <= norm_rtol * ref)) {
        v->bad = 1;
        v->index = -1;
        v->expected = norm_rtol;
        v->got = ref > 0 ? err / ref : INFINITY;
    }
    return 0;
}
