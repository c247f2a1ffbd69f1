/* The reward configuration: defaults, JSON merge (strict: unknown keys are errors), JSON form. */
#include "pk_reward.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Where c keeps a term's weight (PK_REWARD_TERM_WEIGHT terms only). */
static double *weight_of(pk_reward_config *c, const pk_reward_term *t) {
    return (double *)((char *)c + t->weight_at);
}

void pk_reward_config_default(pk_reward_config *c) {
    memset(c, 0, sizeof *c);
    c->gamma = 0.4;
    c->mode = PK_RETURN_SUM;
    for (int i = 0; i < PK_REWARD_TERM_COUNT; i++)
        if (pk_reward_terms[i].kind == PK_REWARD_TERM_WEIGHT)
            *weight_of(c, &pk_reward_terms[i]) = pk_reward_terms[i].weight_default;
    c->transform = PK_SPEEDUP_RAW;
    c->clip_lo = 0.0;
    c->clip_hi = 10.0;
    strcpy(c->baseline, "reference");
}

static const char *const mode_names[] = {"sum", "max"};
static const char *const transform_names[] = {"raw", "log2", "clip"};
/* Baselines the stored facts can measure a speedup against. */
static const char *const baseline_names[] = {"reference", "roofline"};

static int name_index(const char *const *names, int n, const char *s) {
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], s) == 0)
            return i;
    return -1;
}

static int read_number(json_t *v, const char *key, double *out, pk_error *err) {
    if (!json_is_number(v))
        return pk_error_set(err, PK_ERR_INVALID, "reward config: '%s' must be a number", key);
    double d = json_number_value(v);
    if (!isfinite(d))
        return pk_error_set(err, PK_ERR_INVALID, "reward config: '%s' must be finite", key);
    *out = d;
    return PK_OK;
}

static int read_choice(json_t *v, const char *key, const char *const *names, int n, int *out,
                       pk_error *err) {
    int i = json_is_string(v) ? name_index(names, n, json_string_value(v)) : -1;
    if (i < 0)
        return pk_error_set(err, PK_ERR_INVALID, "reward config: '%s' must be one of %s|%s%s%s",
                            key, names[0], names[1], n > 2 ? "|" : "", n > 2 ? names[2] : "");
    *out = i;
    return PK_OK;
}

static int merge_key(pk_reward_config *c, const char *key, json_t *v, pk_error *err) {
    struct {
        const char *name;
        double *dst;
    } numbers[] = {
        {"gamma", &c->gamma},
        {"clip_lo", &c->clip_lo},
        {"clip_hi", &c->clip_hi},
    };
    for (size_t i = 0; i < sizeof numbers / sizeof *numbers; i++)
        if (strcmp(key, numbers[i].name) == 0)
            return read_number(v, key, numbers[i].dst, err);
    for (int i = 0; i < PK_REWARD_TERM_COUNT; i++) {
        const pk_reward_term *t = &pk_reward_terms[i];
        if (t->kind == PK_REWARD_TERM_WEIGHT && strcmp(key, t->weight) == 0)
            return read_number(v, key, weight_of(c, t), err);
    }
    int choice = 0, rc;
    if (strcmp(key, "mode") == 0) {
        if ((rc = read_choice(v, key, mode_names, 2, &choice, err)))
            return rc;
        c->mode = (pk_return_mode)choice;
        return PK_OK;
    }
    if (strcmp(key, "transform") == 0) {
        if ((rc = read_choice(v, key, transform_names, 3, &choice, err)))
            return rc;
        c->transform = (pk_speedup_transform)choice;
        return PK_OK;
    }
    if (strcmp(key, "baseline") == 0) {
        if ((rc = read_choice(v, key, baseline_names, 2, &choice, err)))
            return rc;
        snprintf(c->baseline, sizeof c->baseline, "%s", baseline_names[choice]);
        return PK_OK;
    }
    return pk_error_set(err, PK_ERR_INVALID, "reward config: unknown key '%s'", key);
}

static int validate(const pk_reward_config *c, pk_error *err) {
    if (c->gamma < 0.0 || c->gamma > 1.0)
        return pk_error_set(err, PK_ERR_INVALID, "reward config: 'gamma' must be in [0, 1]");
    if (c->transform == PK_SPEEDUP_CLIP && !(c->clip_lo <= c->clip_hi))
        return pk_error_set(err, PK_ERR_INVALID,
                            "reward config: 'clip_lo' must not exceed 'clip_hi'");
    return PK_OK;
}

static int merge_object(pk_reward_config *c, json_t *obj, pk_error *err) {
    if (!json_is_object(obj))
        return pk_error_set(err, PK_ERR_INVALID, "reward config: expected a JSON object");
    pk_reward_config next = *c;
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        int rc = merge_key(&next, key, v, err);
        if (rc)
            return rc;
    }
    int rc = validate(&next, err);
    if (rc)
        return rc;
    *c = next;
    return PK_OK;
}

static json_t *parse(const char *json, const char *what, pk_error *err) {
    if (!json)
        return pk_error_set(err, PK_ERR_INVALID, "%s: no JSON given", what), NULL;
    json_error_t je;
    json_t *root = json_loads(json, 0, &je);
    if (!root)
        pk_error_set(err, PK_ERR_INVALID, "%s: invalid JSON at line %d: %s", what, je.line,
                     je.text);
    return root;
}

int pk_reward_config_merge_json(pk_reward_config *c, const char *json, pk_error *err) {
    json_t *root = parse(json, "reward config", err);
    if (!root)
        return PK_ERR_INVALID;
    int rc = merge_object(c, root, err);
    json_decref(root);
    return rc;
}

static const char *const settings_keys[] = {
    "feedback", "check", "stop_on_correct", "max_turns", "seed", "seed_source", "group", "profile"};

int pk_reward_config_merge_user_json(pk_reward_config *c, const char *json, pk_error *err) {
    json_t *root = parse(json, "reward config", err);
    if (!root)
        return PK_ERR_INVALID;
    json_t *reward = json_is_object(root) ? json_object_get(root, "reward") : NULL;
    int rc = PK_OK;
    if (reward) {
        const char *key;
        json_t *v;
        json_object_foreach(root, key, v) {
            int known = !strcmp(key, "reward");
            for (size_t i = 0; !known && i < sizeof settings_keys / sizeof *settings_keys; i++)
                known = !strcmp(key, settings_keys[i]);
            if (!known) {
                rc = pk_error_set(err, PK_ERR_INVALID,
                                  "reward config: unknown key '%s' next to 'reward' (either the "
                                  "reward keys alone, or {\"reward\": {...}} as in reset's "
                                  "options and info.settings)",
                                  key);
                break;
            }
        }
        if (!rc && !json_is_object(reward))
            rc = pk_error_set(err, PK_ERR_INVALID, "reward config: 'reward' must be an object");
    }
    if (!rc)
        rc = merge_object(c, reward ? reward : root, err);
    json_decref(root);
    return rc;
}

int pk_reward_config_from_stored_json(const char *config_json, pk_reward_config *c, pk_error *err) {
    pk_reward_config_default(c);
    json_t *root = parse(config_json, "stored episode config", err);
    if (!root)
        return PK_ERR_INVALID;
    json_t *reward = json_is_object(root) ? json_object_get(root, "reward") : NULL;
    int rc = merge_object(c, reward ? reward : root, err);
    json_decref(root);
    return rc;
}

/* Shortest text that reads back as the same double: 0.4, not 0.40000000000000002. */
static int put_number(pk_strbuf *sb, const char *key, double v) {
    char buf[40];
    if (v == floor(v) && fabs(v) < 1e15) /* 10.0, not 1e+01 */
        snprintf(buf, sizeof buf, "%.1f", v);
    else
        for (int p = 1; p <= 17; p++) {
            snprintf(buf, sizeof buf, "%.*g", p, v);
            if (strtod(buf, NULL) == v)
                break;
        }
    return pk_strbuf_printf(sb, "%s\"%s\":%s", sb->len > 1 ? "," : "", key, buf);
}

static int put_string(pk_strbuf *sb, const char *key, const char *v) {
    json_t *s = json_string(v);
    char *text = s ? json_dumps(s, JSON_ENCODE_ANY) : NULL;
    json_decref(s);
    int rc = text ? pk_strbuf_printf(sb, "%s\"%s\":%s", sb->len > 1 ? "," : "", key, text)
                  : PK_ERR_NOMEM;
    free(text);
    return rc;
}

char *pk_reward_config_to_json(const pk_reward_config *c) {
    const char *mode = c->mode == PK_RETURN_MAX ? "max" : "sum";
    const char *transform = (unsigned)c->transform < 3 ? transform_names[c->transform] : "raw";
    char baseline[sizeof c->baseline + 1];
    snprintf(baseline, sizeof baseline, "%.*s", (int)sizeof c->baseline, c->baseline);
    pk_strbuf sb = {0};
    int rc = pk_strbuf_puts(&sb, "{");
    rc = rc ? rc : put_number(&sb, "gamma", c->gamma);
    rc = rc ? rc : put_string(&sb, "mode", mode);
    /* Each term's settings where it stands in the table: the stored configs keep this order. */
    for (int i = 0; i < PK_REWARD_TERM_COUNT; i++) {
        const pk_reward_term *t = &pk_reward_terms[i];
        if (t->kind == PK_REWARD_TERM_WEIGHT) {
            rc = rc ? rc : put_number(&sb, t->weight, pk_reward_term_weight(c, t));
        } else {
            rc = rc ? rc : put_string(&sb, "transform", transform);
            rc = rc ? rc : put_number(&sb, "clip_lo", c->clip_lo);
            rc = rc ? rc : put_number(&sb, "clip_hi", c->clip_hi);
        }
    }
    rc = rc ? rc : put_string(&sb, "baseline", baseline);
    rc = rc ? rc : pk_strbuf_puts(&sb, "}");
    if (rc) {
        pk_strbuf_free(&sb);
        return NULL;
    }
    return pk_strbuf_take(&sb);
}
