/* The operator's reward and feedback defaults and hooks (server_settings.h). */
#include "server_settings.h"

#include <stdio.h>
#include <stdlib.h>

static int load_json_file(const char *path, json_t **out, pk_error *err) {
    json_error_t je;
    *out = json_load_file(path, 0, &je);
    if (!*out)
        return pk_error_set(err, PK_ERR_INVALID, "%s:%d: %s", path, je.line, je.text);
    if (!json_is_object(*out)) {
        json_decref(*out);
        *out = NULL;
        return pk_error_set(err, PK_ERR_INVALID, "%s: must hold a JSON object", path);
    }
    return PK_OK;
}

/* The operator's hooks: --hook NAME=SPEC and the feedback config's "hook_registry" (taken out
 * of the defaults: clients never see or set it). */
static int init_hooks(pk_server *s, pk_error *err) {
    s->hooks = pk_hook_registry_new();
    if (!s->hooks)
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    for (int i = 0; i < s->opts.n_hook_args; i++) {
        int rc = pk_hook_registry_add_arg(s->hooks, s->opts.hook_args[i], err);
        if (rc)
            return rc;
    }
    json_t *reg = json_object_get(s->feedback_default, "hook_registry");
    if (reg) {
        char *text = json_dumps(reg, JSON_COMPACT | JSON_ENCODE_ANY);
        int rc = text ? pk_hook_registry_add_json(s->hooks, text, err)
                      : pk_error_set(err, PK_ERR_NOMEM, "out of memory");
        free(text);
        if (rc) {
            char inner[sizeof err->message];
            snprintf(inner, sizeof inner, "%s", err->message);
            return pk_error_set(err, rc, "%s: %s", s->opts.feedback_config_path, inner);
        }
        json_object_del(s->feedback_default, "hook_registry");
    }
    for (size_t i = 0; i < pk_hook_registry_count(s->hooks); i++) {
        const char *name = pk_hook_registry_name(s->hooks, i);
        fprintf(stderr, "pkgym serve: hook %s = %s (runs in the sandbox)\n", name,
                pk_hook_registry_spec(s->hooks, name));
    }
    return PK_OK;
}

int pk_server_settings_load(pk_server *s, pk_error *err) {
    pk_reward_config_default(&s->reward_default);
    if (s->opts.reward_config_path) {
        char *text;
        size_t len;
        int rc = pk_read_file(s->opts.reward_config_path, &text, &len, err);
        if (rc)
            return rc;
        rc = pk_reward_config_merge_json(&s->reward_default, text, err);
        free(text);
        if (rc)
            return rc;
    }
    if (s->opts.feedback_config_path) {
        int rc = load_json_file(s->opts.feedback_config_path, &s->feedback_default, err);
        if (rc)
            return rc;
    } else {
        s->feedback_default = json_object();
    }
    int rc = init_hooks(s, err);
    if (rc)
        return rc;
    /* Fail at start, not at the first reset, when the feedback settings are wrong. */
    char *fb = json_dumps(s->feedback_default, JSON_COMPACT);
    pk_summarizer *probe = NULL;
    rc = fb ? pk_summarizer_create_with_hooks(fb, s->hooks, s->opts.templates_dir, &probe, err)
            : pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    free(fb);
    pk_summarizer_free(probe);
    return rc;
}
