/* The profiles of an eval run (reset's options.profile; docs/feedback.md, "Profiles"): one SVG
 * timeline per profiled turn, from the raw data of the step reply's info.profile. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_eval_internal.h"
#include "pk_profile.h"

void pk_eval_profile_svg_name(const pk_eval_run *run, int traj, int k, char *out, size_t cap) {
    const pk_eval_traj *t = &run->trajs[traj];
    char id[160];
    snprintf(id, sizeof id, "%s", run->problems[t->problem].id);
    for (char *c = id; *c; c++)
        if (*c == '/' || *c == ' ')
            *c = '_';
    snprintf(out, cap, "profile-%s-t%d-turn%d.svg", id, t->index, k + 1);
}

int pk_eval_profiles_write(const pk_eval_run *run, pk_strbuf *md, pk_error *err) {
    int listed = 0;
    for (int i = 0; i < run->n_trajs; i++) {
        const pk_eval_traj *t = &run->trajs[i];
        for (int k = 0; k < t->n_turns; k++) {
            const pk_eval_turn *u = &t->turns[k];
            if (!u->profile_status[0])
                continue;
            if (!listed++)
                pk_strbuf_puts(md, "\nProfiles (reset's options.profile; docs/feedback.md):\n\n"
                                   "| problem | trajectory | turn | profile | cost | timeline |\n"
                                   "|---|---|---|---|---|---|\n");
            char name[300] = "";
            if (u->profile_raw) {
                pk_profile_data d;
                if (pk_profile_data_from_json(u->profile_raw, &d, err))
                    return PK_ERR_INVALID;
                char title[300];
                snprintf(title, sizeof title, "%s, trajectory %d, turn %d",
                         run->problems[t->problem].id, t->index, k + 1);
                char *svg = pk_profile_svg(&d, title);
                pk_profile_data_free(&d);
                pk_eval_profile_svg_name(run, i, k, name, sizeof name);
                char *path = svg ? pk_path_join(run->args->out_dir, name) : NULL;
                int rc = path ? pk_write_file(path, svg, strlen(svg), err)
                              : pk_error_set(err, PK_ERR_NOMEM, "out of memory");
                free(path);
                free(svg);
                if (rc)
                    return rc;
            }
            pk_strbuf_printf(md, "| %s | %d | %d | %s | %.1f s | %s%s%s |\n",
                             run->problems[t->problem].id, t->index, k + 1, u->profile_status,
                             u->profile_cost_s, name[0] ? "`" : "", name[0] ? name : "none",
                             name[0] ? "`" : "");
        }
    }
    return PK_OK;
}
