/* Speedups per GPU model (pk_eval_internal.h). A trajectory belongs to the one model its turns
 * ran on; one whose turns ran on several (its model's workers left mid-run) is "mixed", and
 * one with no GPU run is "host". */
#include <stdlib.h>
#include <string.h>

#include "pk_eval_internal.h"
#include "pk_metrics.h"

#define MIXED "(mixed)"
#define HOST "host"

static const char *model_of(const pk_eval_traj *t) {
    const char *m = NULL;
    for (int k = 0; k < t->n_turns; k++) {
        const char *g = t->turns[k].gpu;
        if (!g[0])
            continue;
        if (m && strcmp(m, g) != 0)
            return MIXED;
        m = g;
    }
    return m ? m : HOST;
}

json_t *pk_eval_gpu_models_json(const pk_eval_run *run) {
    json_t *out = json_object();
    for (int i = 0; out && i < run->n_trajs; i++) {
        const pk_eval_traj *t = &run->trajs[i];
        if (t->n_turns == 0)
            continue;
        const char *m = model_of(t);
        json_t *o = json_object_get(out, m);
        if (!o) {
            o = json_pack("{s:i, s:i, s:i, s:f, s:f}", "trajectories", 0, "turns", 0, "correct", 0,
                          "best_speedup", 0.0, "mean_best_speedup", 0.0);
            json_object_set_new(out, m, o);
        }
        pk_status st[64];
        double sp[64];
        int n = t->n_turns < 64 ? t->n_turns : 64;
        for (int k = 0; k < n; k++) {
            st[k] = (pk_status)t->turns[k].status;
            sp[k] = t->turns[k].speedup;
        }
        pk_trajectory tr = {.n_turns = n, .status = st, .speedup = sp};
        double best = pk_traj_best_speedup(&tr);
        int trajs = (int)json_integer_value(json_object_get(o, "trajectories")) + 1;
        double mean = json_real_value(json_object_get(o, "mean_best_speedup"));
        json_object_set_new(o, "trajectories", json_integer(trajs));
        json_object_set_new(
            o, "turns", json_integer(json_integer_value(json_object_get(o, "turns")) + t->n_turns));
        json_object_set_new(
            o, "correct",
            json_integer(json_integer_value(json_object_get(o, "correct")) + pk_traj_correct(&tr)));
        if (best > json_real_value(json_object_get(o, "best_speedup")))
            json_object_set_new(o, "best_speedup", json_real(best));
        json_object_set_new(o, "mean_best_speedup", json_real(mean + (best - mean) / trajs));
    }
    return out;
}

void pk_eval_gpu_models_md(const pk_eval_run *run, pk_strbuf *md) {
    json_t *models = pk_eval_gpu_models_json(run);
    size_t gpu_models = 0;
    const char *key;
    json_t *o;
    json_object_foreach(models, key, o) gpu_models += strcmp(key, HOST) != 0;
    if (gpu_models > 0) {
        pk_strbuf_puts(md, "\nBy GPU model (a speedup is measured against the baseline of the "
                           "model the turn ran on; models are not compared with each other):\n\n"
                           "| GPU model | trajectories | turns | correct | best speedup | mean "
                           "best |\n|---|---|---|---|---|---|\n");
        json_object_foreach(models, key, o) {
            int n = (int)json_integer_value(json_object_get(o, "trajectories"));
            pk_strbuf_printf(
                md, "| %s | %d | %d | %.0f%% | %.3fx | %.3fx |\n", key, n,
                (int)json_integer_value(json_object_get(o, "turns")),
                n ? 100.0 * (double)json_integer_value(json_object_get(o, "correct")) / n : 0.0,
                json_real_value(json_object_get(o, "best_speedup")),
                json_real_value(json_object_get(o, "mean_best_speedup")));
        }
        if (gpu_models > 1)
            pk_strbuf_puts(md, "\n**This run used several GPU models**: the speedups in the "
                               "tables above mix them; compare the rows of this table "
                               "instead.\n");
    }
    json_decref(models);
}
