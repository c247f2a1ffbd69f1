/* Per-episode settings (see episode_options.h and docs/protocol.md, "reset"). */
#include "episode_options.h"

#include "episode_examples.h"
#include "pk_profile.h"

#include <stdlib.h>
#include <string.h>

#define MAX_TIMEOUT_MS 3600000

static int apply_reward(pk_episode *e, const json_t *reward, const pk_reward_config *def,
                        json_t *settings, pk_error *err) {
    e->reward = *def;
    if (reward) {
        if (!json_is_object(reward))
            return pk_error_set(err, PK_ERR_INVALID, "options.reward must be a map");
        char *text = json_dumps(reward, JSON_COMPACT);
        pk_error sub;
        int rc = text ? pk_reward_config_merge_json(&e->reward, text, &sub) : PK_ERR_NOMEM;
        free(text);
        if (rc)
            return pk_error_set(err, PK_ERR_INVALID, "options.reward: %s",
                                rc == PK_ERR_NOMEM ? "out of memory" : sub.message);
    }
    char *text = pk_reward_config_to_json(&e->reward);
    json_t *eff = text ? json_loads(text, 0, NULL) : NULL;
    free(text);
    if (!eff)
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    json_object_set_new(settings, "reward", eff);
    return PK_OK;
}

/* The registered hooks the settings use, so that the stored settings say what ran. */
static void record_hook_specs(json_t *merged, const pk_hook_registry *hooks) {
    json_t *used = json_object();
    const char *slot;
    json_t *v;
    json_object_foreach(json_object_get(merged, "hooks"), slot, v) {
        const char *name =
            json_is_object(v) ? json_string_value(json_object_get(v, "use")) : json_string_value(v);
        const char *spec = pk_hook_registry_spec(hooks, name);
        if (spec && used)
            json_object_set_new(used, name, json_string(spec));
    }
    if (json_object_size(used))
        json_object_set_new(merged, "hook_registry", used);
    else
        json_decref(used);
}

static int apply_feedback(pk_episode *e, const json_t *feedback, const json_t *def,
                          const pk_hook_registry *hooks, const char *templates_dir,
                          json_t *settings, pk_error *err) {
    if (feedback && !json_is_object(feedback))
        return pk_error_set(err, PK_ERR_INVALID, "options.feedback must be a map");
    if (json_object_get(feedback, "hook_registry"))
        return pk_error_set(err, PK_ERR_INVALID,
                            "options.feedback.hook_registry: only the operator registers hooks "
                            "(pkgym serve --hook NAME=...); options name a registered hook");
    json_t *merged = json_deep_copy(def);
    if (!merged || (feedback && json_object_update_recursive(merged, (json_t *)feedback))) {
        json_decref(merged);
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    }
    char *text = json_dumps(merged, JSON_COMPACT);
    pk_error sub;
    pk_error_clear(&sub);
    int rc = text
                 ? pk_summarizer_create_with_hooks(text, hooks, templates_dir, &e->summarizer, &sub)
                 : PK_ERR_NOMEM;
    free(text);
    if (rc == PK_OK)
        rc = pk_summarizer_set_problem(e->summarizer, pk_problem_id(e->problem),
                                       pk_problem_entry(e->problem), &sub);
    json_decref(merged);
    if (rc)
        return pk_error_set(err, rc == PK_ERR_NOMEM ? PK_ERR_NOMEM : PK_ERR_INVALID,
                            "options.feedback: %s", sub.message);
    /* Every setting in effect, the summarizer's defaults included, not only those given. */
    char *eff_text = pk_summarizer_settings_json(e->summarizer);
    json_t *eff = eff_text ? json_loads(eff_text, 0, NULL) : NULL;
    free(eff_text);
    if (!eff)
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    record_hook_specs(eff, hooks); /* what each registered hook name stood for */
    json_object_set_new(settings, "feedback", eff);
    return PK_OK;
}

static int int_in(const json_t *v, const char *name, long long lo, long long hi, int *out,
                  pk_error *err) {
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return pk_error_set(err, PK_ERR_INVALID,
                            "options.check.%s must be an integer in [%lld, %lld]", name, lo, hi);
    *out = (int)json_integer_value(v);
    return PK_OK;
}

/* options.check.world_size: one of the problem's world sizes (whether the server has that many
 * GPUs is checked by reset). */
static int world_size_in(const pk_episode *e, const json_t *v, int *out, pk_error *err) {
    int sizes[16], n = pk_problem_world_sizes(e->problem, sizes, 16);
    json_int_t w = json_is_integer(v) ? json_integer_value(v) : 0;
    if (w >= 1 && w <= 64 && pk_problem_world_allowed(e->problem, (int)w)) {
        *out = (int)json_integer_value(v);
        return PK_OK;
    }
    pk_strbuf list = {0};
    for (int i = 0; i < n && i < 16; i++)
        pk_strbuf_printf(&list, "%s%d", i ? ", " : "", sizes[i]);
    pk_error_set(err, PK_ERR_INVALID,
                 "options.check.world_size must be one of the world sizes of %s: %s",
                 pk_problem_id(e->problem), list.data ? list.data : "?");
    pk_strbuf_free(&list);
    return PK_ERR_INVALID;
}

static int apply_check(pk_episode *e, const json_t *check, json_t *settings, pk_error *err) {
    pk_eval_opts_default(&e->eval);
    if (check && !json_is_object(check))
        return pk_error_set(err, PK_ERR_INVALID, "options.check must be a map");
    const char *key;
    json_t *v;
    int rc = PK_OK;
    json_object_foreach((json_t *)check, key, v) {
        if (strcmp(key, "trials") == 0)
            rc = int_in(v, key, 1, PK_EVAL_MAX_TRIALS, &e->eval.trials, err);
        else if (strcmp(key, "compile_timeout_ms") == 0)
            rc = int_in(v, key, 1, MAX_TIMEOUT_MS, &e->eval.compile_timeout_ms, err);
        else if (strcmp(key, "run_timeout_ms") == 0)
            rc = int_in(v, key, 1, MAX_TIMEOUT_MS, &e->eval.run_timeout_ms, err);
        else if (strcmp(key, "world_size") == 0)
            rc = world_size_in(e, v, &e->eval.world_size, err);
        else if (strcmp(key, "skip_timing") == 0) {
            if (!json_is_boolean(v))
                rc = pk_error_set(err, PK_ERR_INVALID, "options.check.skip_timing must be a bool");
            else
                e->eval.skip_timing = json_is_true(v);
        } else
            rc = pk_error_set(err, PK_ERR_INVALID,
                              "options.check.%s: unknown key (trials, skip_timing, "
                              "compile_timeout_ms, run_timeout_ms, world_size)",
                              key);
        if (rc)
            return rc;
    }
    /* 0 means "the problem's or the harness's default": reported as null. */
    json_t *eff = json_pack(
        "{s:o, s:b, s:o, s:o, s:i}", "trials",
        e->eval.trials ? json_integer(e->eval.trials) : json_null(), "skip_timing",
        e->eval.skip_timing, "compile_timeout_ms",
        e->eval.compile_timeout_ms ? json_integer(e->eval.compile_timeout_ms) : json_null(),
        "run_timeout_ms",
        e->eval.run_timeout_ms ? json_integer(e->eval.run_timeout_ms) : json_null(), "world_size",
        e->eval.world_size ? e->eval.world_size : pk_problem_world_size(e->problem));
    if (!eff)
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    json_object_set_new(settings, "check", eff);
    return PK_OK;
}

/* options.profile: "none" (the default), "summary" or "full" (docs/feedback.md, "Profiles").
 * After apply_check, which resets e->eval. */
static int apply_profile(pk_episode *e, const json_t *v, int profiling_on, json_t *settings,
                         pk_error *err) {
    int level = PK_PROFILE_NONE;
    if (v) {
        level = json_is_string(v) ? pk_profile_level_parse(json_string_value(v)) : -1;
        if (level < 0)
            return pk_error_set(err, PK_ERR_INVALID,
                                "options.profile must be one of \"none\", \"summary\", \"full\"");
        if (level > PK_PROFILE_NONE && !profiling_on)
            return pk_error_set(err, PK_ERR_INVALID,
                                "options.profile: profiling is off on this server (its operator "
                                "turns it on with pkgym serve --profile-per-minute N)");
    }
    e->eval.profile = level;
    json_object_set_new(settings, "profile", json_string(pk_profile_level_name(level)));
    return PK_OK;
}

int pk_episode_apply_options(pk_episode *e, const json_t *options,
                             const pk_reward_config *reward_default, const json_t *feedback_default,
                             const pk_hook_registry *hooks, const char *templates_dir,
                             int profiling_on, pk_error *err) {
    if (options && !json_is_object(options))
        return pk_error_set(err, PK_ERR_INVALID, "field 'options' must be a map");
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)options, key, v) {
        if (strcmp(key, "reward") && strcmp(key, "feedback") && strcmp(key, "check") &&
            strcmp(key, "stop_on_correct") && strcmp(key, "examples") && strcmp(key, "profile"))
            return pk_error_set(err, PK_ERR_INVALID,
                                "options.%s: unknown key (reward, feedback, check, "
                                "stop_on_correct, examples, profile)",
                                key);
    }
    json_t *stop = json_object_get(options, "stop_on_correct");
    if (stop && !json_is_boolean(stop))
        return pk_error_set(err, PK_ERR_INVALID, "options.stop_on_correct must be a bool");
    e->stop_on_correct = stop && json_is_true(stop);
    json_t *settings = json_object();
    if (!settings)
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    int rc = apply_reward(e, json_object_get(options, "reward"), reward_default, settings, err);
    if (!rc)
        rc = apply_feedback(e, json_object_get(options, "feedback"), feedback_default, hooks,
                            templates_dir, settings, err);
    if (!rc)
        rc = apply_check(e, json_object_get(options, "check"), settings, err);
    if (!rc)
        rc = pk_episode_examples_option(e, json_object_get(options, "examples"), settings, err);
    if (!rc)
        rc = apply_profile(e, json_object_get(options, "profile"), profiling_on, settings, err);
    if (rc) {
        json_decref(settings);
        return rc;
    }
    json_object_set_new(settings, "stop_on_correct", json_boolean(e->stop_on_correct));
    e->settings = settings;
    return PK_OK;
}
