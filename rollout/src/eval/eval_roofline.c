/* The rooflines in the `pkgym eval` report: per problem, its best correct time against the
 * two rooflines the server reported with each step (docs/problems.md, "Roofline"): the floor,
 * which even perfect overlap cannot beat, and the no-overlap roofline (phases one after
 * another). */
#include "pk_eval_internal.h"

typedef struct rooflines {
    double best_us, floor_us, no_overlap_us; /* 0: unknown */
} rooflines;

static rooflines of_problem(const pk_eval_run *run, int p) {
    rooflines r = {0, 0, 0};
    for (int i = 0; i < run->n_trajs; i++) {
        const pk_eval_traj *t = &run->trajs[i];
        for (int k = 0; t->problem == p && k < t->n_turns; k++) {
            const pk_eval_turn *u = &t->turns[k];
            if (u->roofline_floor_us > 0 && u->roofline_no_overlap_us > 0) {
                r.floor_us = u->roofline_floor_us;
                r.no_overlap_us = u->roofline_no_overlap_us;
            }
            if (u->status == PK_STATUS_CORRECT && u->time_us > 0 &&
                (r.best_us == 0 || u->time_us < r.best_us))
                r.best_us = u->time_us;
        }
    }
    return r;
}

static json_t *real_or_null(double v) {
    return v > 0 ? json_real(v) : json_null();
}

json_t *pk_eval_roofline_json(const pk_eval_run *run, int p) {
    rooflines r = of_problem(run, p);
    if (r.floor_us <= 0)
        return json_null();
    int timed = r.best_us > 0;
    return json_pack(
        "{s:f, s:f, s:o, s:o, s:o}", "floor_us", r.floor_us, "no_overlap_us", r.no_overlap_us,
        "best_time_us", real_or_null(r.best_us), "best_percent_of_floor",
        real_or_null(timed ? 100.0 * r.floor_us / r.best_us : 0), "best_percent_of_no_overlap",
        real_or_null(timed ? 100.0 * r.no_overlap_us / r.best_us : 0));
}

void pk_eval_roofline_markdown(pk_strbuf *md, const pk_eval_run *run) {
    int any = 0;
    for (int p = 0; p < run->n_problems; p++) {
        rooflines r = of_problem(run, p);
        if (r.floor_us <= 0)
            continue;
        if (!any++)
            pk_strbuf_puts(md, "\nRooflines on this GPU: the *roofline floor* is the bound that "
                               "even perfect overlap of compute, memory and communication cannot "
                               "beat; the *no-overlap roofline* runs the problem's phases one "
                               "after another at peak speed (an overlapping kernel can beat it). "
                               "Percentages: roofline / best time.\n\n| problem | best time | "
                               "no-overlap roofline | % of no-overlap | roofline floor | "
                               "% of floor |\n|---|---|---|---|---|---|\n");
        if (r.best_us > 0)
            pk_strbuf_printf(md, "| %s | %.1f us | %.1f us | %.0f%% | %.1f us | %.0f%% |\n",
                             run->problems[p].id, r.best_us, r.no_overlap_us,
                             100.0 * r.no_overlap_us / r.best_us, r.floor_us,
                             100.0 * r.floor_us / r.best_us);
        else
            pk_strbuf_printf(md, "| %s | no correct timed turn | %.1f us | - | %.1f us | - |\n",
                             run->problems[p].id, r.no_overlap_us, r.floor_us);
    }
}
