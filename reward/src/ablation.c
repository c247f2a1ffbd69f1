/* Reward ablation: every stored trajectory rescored under a config, then GRPO advantages
 * normalized over all turns of all trajectories of a problem (or group), as Kevin does. */
#include "ablation.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_reader.h"

typedef struct collect_ctx {
    const pk_ablation_opts *opts;
    pk_ablation *out;
    int cap;
} collect_ctx;

static char *dup_or_null(const char *s) {
    return s ? strdup(s) : NULL;
}

static int differs(double a, double b, double tol) {
    return !(fabs(a - b) <= tol * fmax(1.0, fmax(fabs(a), fabs(b))));
}

/* Facts of one stored turn: the stored status column is the verdict the agent saw; the
 * measurements come from the result JSON (absent for format errors and the like). */
static void turn_facts(const pk_turn *t, pk_turn_facts *f) {
    if (!t->result_json || pk_turn_facts_from_result_json(t->result_json, f, NULL) != PK_OK)
        memset(f, 0, sizeof *f);
    f->status = t->status;
}

static int rescore(const pk_store_episode *se, const pk_ablation_opts *o, pk_ablation_episode *e,
                   pk_error *err) {
    if (o->config) {
        e->config = *o->config;
    } else if (pk_reward_config_from_stored_json(se->row.config_json, &e->config, err)) {
        char why[sizeof err->message];
        snprintf(why, sizeof why, "%s", err->message);
        return pk_error_set(err, PK_ERR_INVALID, "episode '%s': %s", se->row.episode_id, why);
    }
    e->id = dup_or_null(se->row.episode_id);
    e->problem_id = dup_or_null(se->row.problem_id);
    e->group = dup_or_null(se->row.group);
    e->seed = se->row.seed;
    e->finished = se->finished;
    e->returns_malformed = se->returns_malformed;
    e->n_turns = se->n_turns;
    e->turns = calloc(se->n_turns ? (size_t)se->n_turns : 1, sizeof *e->turns);
    double *scores = calloc(se->n_turns ? (size_t)se->n_turns : 1, sizeof *scores);
    if (!e->id || !e->problem_id || (se->row.group && !e->group) || !e->turns || !scores) {
        free(scores);
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < se->n_turns; i++) {
        pk_turn_facts f;
        turn_facts(&se->turns[i], &f);
        pk_ablation_turn *t = &e->turns[i];
        t->turn = se->turns[i].turn;
        t->status = f.status;
        t->speedup = pk_reward_speedup(&e->config, &f);
        t->score = scores[i] = pk_reward_score(&e->config, &f);
        t->online_score = se->turns[i].score;
    }
    double *returns = scores;
    pk_reward_returns(&e->config, scores, se->n_turns, returns);
    for (int i = 0; i < se->n_turns; i++) {
        pk_ablation_turn *t = &e->turns[i];
        t->ret = returns[i];
        t->mismatch = differs(t->score, t->online_score, o->tolerance) || e->returns_malformed;
        if (se->finished) {
            t->online_return = se->returns[i];
            t->mismatch |= differs(t->ret, t->online_return, o->tolerance);
        }
    }
    free(scores);
    return PK_OK;
}

static int collect(const pk_store_episode *se, void *vctx, pk_error *err) {
    collect_ctx *ctx = vctx;
    pk_ablation *a = ctx->out;
    if (a->n_episodes == ctx->cap) {
        int cap = ctx->cap ? 2 * ctx->cap : 16;
        pk_ablation_episode *grown = realloc(a->episodes, sizeof *grown * (size_t)cap);
        if (!grown)
            return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
        a->episodes = grown;
        ctx->cap = cap;
    }
    pk_ablation_episode *e = &a->episodes[a->n_episodes++];
    memset(e, 0, sizeof *e);
    return rescore(se, ctx->opts, e, err);
}

const char *pk_ablation_key(const pk_ablation_episode *e, pk_normalize normalize) {
    if (normalize == PK_NORMALIZE_GROUP)
        return e->group; /* NULL: ungrouped, never merged with another episode */
    return e->problem_id;
}

static int find_set(const pk_ablation *a, const char *key) {
    for (int i = 0; i < a->n_sets; i++)
        if (!a->sets[i].ungrouped && strcmp(a->sets[i].key, key) == 0)
            return i;
    return -1;
}

/* "(ungrouped) <episode id>": cannot collide with a group, which is looked up by name only
 * among grouped sets. */
static char *ungrouped_key(const pk_ablation_episode *e) {
    pk_strbuf sb = {0};
    if (pk_strbuf_printf(&sb, "(ungrouped) %s", e->id)) {
        pk_strbuf_free(&sb);
        return NULL;
    }
    return pk_strbuf_take(&sb);
}

/* Mean and population std of each set's returns, then every turn's advantage. */
static int normalize(pk_ablation *a, const pk_ablation_opts *o, pk_error *err) {
    int *set_of = calloc((size_t)a->n_episodes + 1, sizeof *set_of);
    a->sets = calloc((size_t)a->n_episodes + 1, sizeof *a->sets);
    if (!set_of || !a->sets) {
        free(set_of);
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < a->n_episodes; i++) {
        const char *key = pk_ablation_key(&a->episodes[i], o->normalize);
        int k = key ? find_set(a, key) : -1;
        if (k < 0) {
            k = a->n_sets;
            a->sets[k].ungrouped = !key;
            a->n_ungrouped += !key;
            if (!(a->sets[k].key = key ? strdup(key) : ungrouped_key(&a->episodes[i]))) {
                free(set_of);
                return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
            }
            a->n_sets++;
        }
        set_of[i] = k;
        a->sets[k].n_trajectories++;
        a->sets[k].n_turns += a->episodes[i].n_turns;
        for (int t = 0; t < a->episodes[i].n_turns; t++)
            a->sets[k].mean += a->episodes[i].turns[t].ret;
    }
    for (int k = 0; k < a->n_sets; k++)
        if (a->sets[k].n_turns)
            a->sets[k].mean /= a->sets[k].n_turns;
    for (int i = 0; i < a->n_episodes; i++) {
        pk_ablation_set *set = &a->sets[set_of[i]];
        for (int t = 0; t < a->episodes[i].n_turns; t++) {
            double d = a->episodes[i].turns[t].ret - set->mean;
            set->std += d * d;
        }
    }
    for (int k = 0; k < a->n_sets; k++)
        if (a->sets[k].n_turns)
            a->sets[k].std = sqrt(a->sets[k].std / a->sets[k].n_turns);
    for (int i = 0; i < a->n_episodes; i++) {
        const pk_ablation_set *set = &a->sets[set_of[i]];
        for (int t = 0; t < a->episodes[i].n_turns; t++) {
            pk_ablation_turn *turn = &a->episodes[i].turns[t];
            turn->advantage = (turn->ret - set->mean) / (set->std + o->eps);
        }
    }
    free(set_of);
    return PK_OK;
}

int pk_ablation_run(pk_store *s, const pk_ablation_opts *o, pk_ablation *out, pk_error *err) {
    memset(out, 0, sizeof *out);
    collect_ctx ctx = {.opts = o, .out = out};
    int rc = pk_store_each_episode(s, 0, o->filter, collect, &ctx, err);
    if (rc == PK_OK)
        rc = normalize(out, o, err);
    if (rc) {
        pk_ablation_free(out);
        return rc;
    }
    for (int i = 0; i < out->n_episodes; i++) {
        const pk_ablation_episode *e = &out->episodes[i];
        out->n_unfinished += !e->finished;
        /* Malformed online returns are a mismatch even when there is no turn to flag. */
        out->n_mismatches += e->returns_malformed && e->n_turns == 0;
        for (int t = 0; t < e->n_turns; t++)
            out->n_mismatches += e->turns[t].mismatch;
    }
    return PK_OK;
}

void pk_ablation_free(pk_ablation *a) {
    for (int i = 0; i < a->n_episodes; i++) {
        free(a->episodes[i].id);
        free(a->episodes[i].problem_id);
        free(a->episodes[i].group);
        free(a->episodes[i].turns);
    }
    for (int k = 0; k < a->n_sets; k++)
        free(a->sets[k].key);
    free(a->episodes);
    free(a->sets);
    memset(a, 0, sizeof *a);
}
