/* Per-turn scores from stored facts, and discounted returns (Kevin's sum and max variants). */
#include "pk_reward.h"

#include <jansson.h>
#include <math.h>
#include <string.h>

static double number_at(json_t *root, const char *obj, const char *key) {
    json_t *o = obj ? json_object_get(root, obj) : root;
    json_t *v = json_is_object(o) ? json_object_get(o, key) : NULL;
    double d = json_is_number(v) ? json_number_value(v) : 0.0;
    return isfinite(d) ? d : 0.0;
}

int pk_turn_facts_from_result_json(const char *result_json, pk_turn_facts *f, pk_error *err) {
    memset(f, 0, sizeof *f);
    if (!result_json)
        return pk_error_set(err, PK_ERR_INVALID, "eval result: no JSON given");
    json_error_t je;
    json_t *root = json_loads(result_json, 0, &je);
    if (!root)
        return pk_error_set(err, PK_ERR_INVALID, "eval result: invalid JSON at line %d: %s",
                            je.line, je.text);
    int rc = PK_OK;
    json_t *status = json_is_object(root) ? json_object_get(root, "status") : NULL;
    int st = json_is_string(status) ? pk_status_from_name(json_string_value(status)) : -1;
    if (st < 0) {
        rc = pk_error_set(err, PK_ERR_INVALID,
                          "eval result: 'status' missing or not a known status name");
    } else {
        f->status = (pk_status)st;
        f->speedup = number_at(root, NULL, "speedup");
        f->time_us = number_at(root, "candidate", "median_us");
        /* Results written before the floor and the no-overlap roofline were told apart hold
         * one roofline_us, which was the floor then (all problems of that time had one phase,
         * where the two are equal). */
        f->roofline_floor_us = json_object_get(root, "roofline_floor_us")
                                   ? number_at(root, NULL, "roofline_floor_us")
                                   : number_at(root, NULL, "roofline_us");
        f->time_cv = number_at(root, "candidate", "cv");
        f->baseline_us = number_at(root, "baseline", "us");
        if (f->baseline_us > 0) {
            json_t *source = json_object_get(json_object_get(root, "baseline"), "source");
            f->baseline_cv = number_at(root, "baseline", "cv");
            f->baseline_cached =
                json_is_string(source) && strcmp(json_string_value(source), "cached") == 0;
        } else if ((f->baseline_us = number_at(root, "reference", "median_us")) > 0) {
            f->baseline_cv = number_at(root, "reference", "cv");
        } else if (f->speedup > 0 && f->time_us > 0) {
            /* Written before results carried the baseline: a cached one left reference 0. */
            f->baseline_us = f->speedup * f->time_us;
            f->baseline_cached = 1;
        }
    }
    json_decref(root);
    return rc;
}

double pk_reward_speedup(const pk_reward_config *c, const pk_turn_facts *f) {
    if (strcmp(c->baseline, "roofline") == 0)
        return f->roofline_floor_us > 0 && f->time_us > 0 ? f->roofline_floor_us / f->time_us : 0.0;
    if (f->speedup > 0)
        return f->speedup;
    /* Older results may carry only the two times. */
    return f->baseline_us > 0 && f->time_us > 0 ? f->baseline_us / f->time_us : 0.0;
}

/* An unknown speedup (<= 0: untimed) contributes 0 under every transform. */
static double transform(const pk_reward_config *c, double speedup) {
    if (!(speedup > 0))
        return 0.0;
    switch (c->transform) {
    case PK_SPEEDUP_LOG2:
        return log2(speedup);
    case PK_SPEEDUP_CLIP:
        return fmin(fmax(speedup, c->clip_lo), c->clip_hi);
    case PK_SPEEDUP_RAW:
    default:
        return speedup;
    }
}

void pk_reward_breakdown(const pk_reward_config *c, const pk_turn_facts *f, pk_reward_parts *p) {
    memset(p, 0, sizeof *p);
    if ((unsigned)f->status >= PK_STATUS_COUNT)
        return;
    /* The total is summed in the table's fixed order, so a recomputation gives the same bits. */
    double s = 0.0;
    for (int i = 0; i < PK_REWARD_TERM_COUNT; i++) {
        const pk_reward_term *t = &pk_reward_terms[i];
        if (!(t->statuses & PK_REWARD_AT(f->status)))
            continue;
        double v;
        if (t->kind == PK_REWARD_TERM_SPEEDUP) {
            p->speedup = pk_reward_speedup(c, f);
            v = transform(c, p->speedup);
        } else {
            v = t->sign * pk_reward_term_weight(c, t);
        }
        *(double *)((char *)p + t->part_at) = v;
        s += v;
    }
    p->total = s;
}

double pk_reward_score(const pk_reward_config *c, const pk_turn_facts *f) {
    pk_reward_parts p;
    pk_reward_breakdown(c, f, &p);
    return p.total;
}

void pk_reward_returns(const pk_reward_config *c, const double *scores, int n, double *returns) {
    /* Backwards: R_t = s_t + g R_{t+1}, or max(s_t, g R_{t+1}) (g >= 0 keeps the max). */
    double next = 0.0;
    for (int t = n - 1; t >= 0; t--) {
        double s = scores[t];
        double r;
        if (t == n - 1)
            r = s;
        else if (c->mode == PK_RETURN_MAX)
            r = fmax(s, c->gamma * next);
        else
            r = s + c->gamma * next;
        returns[t] = r;
        next = r;
    }
}

void pk_reward_advantages(const double *returns, int n, double eps, double *advantages) {
    if (n <= 0)
        return;
    double mean = 0.0, var = 0.0;
    for (int i = 0; i < n; i++)
        mean += returns[i];
    mean /= n;
    for (int i = 0; i < n; i++)
        var += (returns[i] - mean) * (returns[i] - mean);
    double sd = sqrt(var / n);
    for (int i = 0; i < n; i++)
        advantages[i] = (returns[i] - mean) / (sd + eps);
}
