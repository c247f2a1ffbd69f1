/* --dump: writes each trial's inputs and the reference's outputs, per rank, so that another
 * implementation (ParallelKernelBench's PyTorch reference, an fp64 oracle) can be run on
 * exactly what pkgym generated (bench/pkb-crosscheck). Only the harness's own buffers are
 * written: the pristine inputs and the reference outputs, never the candidate's. */
#include "pk_runner.h"

#include <stdio.h>
#include <stdlib.h>

static int write_array(rank_state *rs, const char *path, const void *src, size_t bytes) {
    void *host = malloc(bytes ? bytes : 1);
    int rc = !host || rs->b.to_host(&rs->b, host, src, bytes);
    FILE *f = rc ? NULL : fopen(path, "wb");
    rc = rc || !f || fwrite(host, 1, bytes, f) != bytes;
    if (f && fclose(f))
        rc = 1;
    free(host);
    return rc;
}

static int write_manifest(rank_state *rs) {
    char path[1024];
    snprintf(path, sizeof path, "%s/manifest.json", rs->o->dump_dir);
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    const pk_problem *p = rs->p;
    fprintf(f, "{\"problem\": \"%s\", \"world\": %d, \"trials\": %d, \"dims\": {", p->id,
            rs->g->world, rs->plan.trials);
    for (int i = 0; i < p->n_dims; i++)
        fprintf(f, "%s\"%s\": %lld", i ? ", " : "", p->dim_names[i], rs->sz.dims[i]);
    fprintf(f, "}, \"args\": [");
    static const char *roles[] = {"input", "output", "inout"};
    for (int i = 0; i < p->n_args; i++) {
        double atol, rtol;
        pk_arg_tolerance(p, i, &atol, &rtol);
        static const char *checkers[] = {"allclose", "exact", "budget", "custom"};
        const pk_arg_spec *a = &p->args[i];
        fprintf(f,
                "%s{\"name\": \"%s\", \"dtype\": \"%s\", \"role\": \"%s\", \"count\": %zu, "
                "\"atol\": %.17g, \"rtol\": %.17g, \"checker\": \"%s\", \"atol_rms\": %.17g, "
                "\"budget\": %.17g, \"max_ulp\": %d, \"norm_rtol\": %.17g}",
                i ? ", " : "", a->name, pk_dtype_name(a->dtype), roles[a->role], rs->sz.counts[i],
                atol, rtol, checkers[a->checker], a->atol_rms, a->budget, a->max_ulp,
                pk_arg_norm_rtol(p, i));
    }
    fprintf(f, "],\n \"files\": \"t<trial>_r<rank>_<arg>.bin (inputs as given; outputs and "
               "inouts as the reference left them: <arg>.out.bin)\"}\n");
    return fclose(f) ? -1 : 0;
}

/* The call's params (meta.json "params" may depend on the trial): t<trial>_params.json. */
static int write_params(rank_state *rs, int trial, int slot) {
    char path[1024];
    snprintf(path, sizeof path, "%s/t%d_params.json", rs->o->dump_dir, trial);
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f, "{");
    for (int i = 0; i < rs->p->n_params; i++)
        fprintf(f, "%s\"%s\": %.17g", i ? ", " : "", rs->p->params[i].name,
                rs->slot_params[slot][i]);
    fprintf(f, "}\n");
    if (fclose(f))
        return -1;
    /* Which regime each input drew (docs/problems.md, "Input regimes"): t<trial>_regimes.json,
     * so a calibration can take each regime's errors apart. */
    snprintf(path, sizeof path, "%s/t%d_regimes.json", rs->o->dump_dir, trial);
    f = fopen(path, "w");
    if (!f)
        return -1;
    fprintf(f, "{");
    for (int i = 0, n = 0; i < rs->p->n_args; i++)
        if (rs->p->args[i].role != PK_ARG_OUTPUT)
            fprintf(f, "%s\"%s\": \"%s\"", n++ ? ", " : "", rs->p->args[i].name,
                    pk_regime_name((pk_regime)rn_regime_of(rs, trial, i)));
    fprintf(f, "}\n");
    return fclose(f) ? -1 : 0;
}

int rn_dump_trial(rank_state *rs, int trial, int slot, rank_step *st) {
    char path[1024];
    const char *dir = rs->o->dump_dir;
    for (int i = 0; i < rs->p->n_args; i++) {
        const pk_arg_spec *a = &rs->p->args[i];
        int rc = 0;
        if (a->role != PK_ARG_OUTPUT) {
            snprintf(path, sizeof path, "%s/t%d_r%d_%s.bin", dir, trial, rs->ctx.rank, a->name);
            rc = write_array(rs, path, rs->pristine[i], rs->lay.arg_bytes[i]);
        }
        if (!rc && a->role != PK_ARG_INPUT) {
            snprintf(path, sizeof path, "%s/t%d_r%d_%s.out.bin", dir, trial, rs->ctx.rank, a->name);
            rc = write_array(rs, path, rs->ref_out[i], rs->lay.arg_bytes[i]);
        }
        if (rc)
            return rn_fail(st, "cannot write %s", path);
    }
    if (rs->ctx.rank == 0 && trial == 0 && write_manifest(rs))
        return rn_fail(st, "cannot write the dump manifest in %s", dir);
    if (rs->ctx.rank == 0 && write_params(rs, trial, slot))
        return rn_fail(st, "cannot write the trial's params in %s", dir);
    return 0;
}
