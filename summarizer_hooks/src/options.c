/* Per-episode summarizer options: the server's defaults merged with reset's options["feedback"].
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "summarizer_internal.h"

/* Kevin's context limit is 8192 tokens; the character budget is off unless asked for. */
#define PK_DEFAULT_BUDGET_TOKENS 8192
#define PK_DEFAULT_COMPILE_LOG_CHARS 2000
#define PK_DEFAULT_STDERR_CHARS 1000
#define PK_DEFAULT_SUMMARY_CHARS 800
#define PK_DEFAULT_HOOK_TIMEOUT_MS 2000
#define PK_MAX_HOOK_TIMEOUT_MS 60000

static int opt_long(json_t *v, const char *key, long min, long max, long *out, pk_error *err) {
    if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max) {
        return pk_error_set(err, PK_ERR_INVALID,
                            "feedback option %s: expected an integer in [%ld, %ld]", key, min, max);
    }
    *out = (long)json_integer_value(v);
    return PK_OK;
}

/* "(registered: a, b)" or "(none is registered)". */
static void registered_names(const pk_hook_registry *r, char *out, size_t cap) {
    size_t n = pk_hook_registry_count(r);
    int len = snprintf(out, cap, n ? "registered:" : "none is registered");
    for (size_t i = 0; i < n && len > 0 && (size_t)len < cap; i++) {
        len += snprintf(out + len, cap - (size_t)len, "%s %s", i ? "," : "",
                        pk_hook_registry_name(r, i));
    }
}

/* Clients choose hooks by name only: a path, or any name the operator did not register, is
 * refused here, so no option can make the server run a program of the client's choosing. */
static int opt_hook_use(const char *use, const char *name, const pk_hook_registry *reg, pk_hook *h,
                        pk_error *err) {
    free(h->path);
    free(h->name);
    h->path = h->name = NULL;
    if (strcmp(use, "builtin") == 0) {
        h->kind = PK_HOOK_BUILTIN;
        return PK_OK;
    }
    const char *spec = pk_hook_registry_spec(reg, use);
    const char *path = NULL;
    if (!spec || pk_hook_spec_split(spec, &h->kind, &path) != 0) {
        char names[400];
        registered_names(reg, names, sizeof names);
        if (strchr(use, ':') || strchr(use, '/')) {
            return pk_error_set(err, PK_ERR_INVALID,
                                "feedback option hooks.%s: \"%.200s\" is not a registered hook "
                                "name; hooks are chosen by name only, and the operator registers "
                                "them (pkgym serve --hook NAME=plugin:/abs/x.so) (%s)",
                                name, use, names);
        }
        return pk_error_set(err, PK_ERR_INVALID,
                            "feedback option hooks.%s: no hook named \"%.100s\" is registered "
                            "(%s; or \"builtin\")",
                            name, use, names);
    }
    h->path = strdup(path);
    h->name = strdup(use);
    return h->path && h->name ? PK_OK : pk_error_set(err, PK_ERR_NOMEM, "out of memory");
}

/* A hook is "builtin" | a registered name, or {"use": that, "timeout_ms": n}. */
static int opt_hook(json_t *v, const char *name, const pk_hook_registry *reg, pk_hook *h,
                    pk_error *err) {
    if (json_is_string(v))
        return opt_hook_use(json_string_value(v), name, reg, h, err);
    if (!json_is_object(v)) {
        return pk_error_set(err, PK_ERR_INVALID,
                            "feedback option hooks.%s: expected a string or object", name);
    }
    const char *key;
    json_t *val;
    json_object_foreach(v, key, val) {
        int rc = PK_OK;
        if (strcmp(key, "use") == 0 && json_is_string(val)) {
            rc = opt_hook_use(json_string_value(val), name, reg, h, err);
        } else if (strcmp(key, "timeout_ms") == 0) {
            long t = 0;
            rc = opt_long(val, "hooks.<hook>.timeout_ms", 1, PK_MAX_HOOK_TIMEOUT_MS, &t, err);
            h->timeout_ms = (int)t;
        } else {
            rc = pk_error_set(err, PK_ERR_INVALID, "feedback option hooks.%s: unknown key \"%s\"",
                              name, key);
        }
        if (rc != PK_OK)
            return rc;
    }
    return PK_OK;
}

static int opt_hooks(json_t *v, const pk_hook_registry *reg, pk_summarizer_options *o,
                     pk_error *err) {
    if (!json_is_object(v))
        return pk_error_set(err, PK_ERR_INVALID, "feedback option hooks: expected an object");
    /* The shared timeout first, so that a per-hook timeout_ms wins whatever the key order. */
    json_t *t = json_object_get(v, "timeout_ms");
    if (t) {
        long ms = 0;
        int rc = opt_long(t, "hooks.timeout_ms", 1, PK_MAX_HOOK_TIMEOUT_MS, &ms, err);
        if (rc != PK_OK)
            return rc;
        for (int i = 0; i < PK_HOOK_COUNT; i++)
            o->hooks[i].timeout_ms = (int)ms;
    }
    const char *key;
    json_t *val;
    json_object_foreach(v, key, val) {
        if (strcmp(key, "timeout_ms") == 0)
            continue;
        int slot = -1;
        for (int i = 0; i < PK_HOOK_COUNT; i++) {
            if (strcmp(key, pk_hook_slot_name((pk_hook_slot)i)) == 0)
                slot = i;
        }
        if (slot < 0) {
            return pk_error_set(err, PK_ERR_INVALID,
                                "feedback option hooks: unknown key \"%s\" (known: summarize, "
                                "feedback, history, timeout_ms)",
                                key);
        }
        int rc = opt_hook(val, key, reg, &o->hooks[slot], err);
        if (rc != PK_OK)
            return rc;
    }
    return PK_OK;
}

static int opt_apply(json_t *root, const pk_hook_registry *reg, pk_summarizer_options *o,
                     pk_error *err) {
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        int rc;
        if (strcmp(key, "budget_chars") == 0) {
            rc = opt_long(val, key, 0, 1L << 30, &o->budget_chars, err);
        } else if (strcmp(key, "budget_tokens") == 0) {
            rc = opt_long(val, key, 0, 1L << 28, &o->budget_tokens, err);
        } else if (strcmp(key, "compile_log_chars") == 0) {
            rc = opt_long(val, key, 64, 1L << 20, &o->compile_log_chars, err);
        } else if (strcmp(key, "stderr_chars") == 0) {
            rc = opt_long(val, key, 0, 1L << 20, &o->stderr_chars, err);
        } else if (strcmp(key, "summary_chars") == 0) {
            rc = opt_long(val, key, 16, 1L << 20, &o->summary_chars, err);
        } else if (strcmp(key, "hooks") == 0) {
            rc = opt_hooks(val, reg, o, err);
        } else {
            rc = pk_error_set(
                err, PK_ERR_INVALID,
                "unknown feedback option \"%s\" (known: budget_chars, "
                "budget_tokens, compile_log_chars, stderr_chars, summary_chars, hooks)",
                key);
        }
        if (rc != PK_OK)
            return rc;
    }
    return PK_OK;
}

int pk_summarizer_options_parse(const char *options_json, const pk_hook_registry *reg,
                                pk_summarizer_options *o, pk_error *err) {
    memset(o, 0, sizeof *o);
    o->budget_tokens = PK_DEFAULT_BUDGET_TOKENS;
    o->compile_log_chars = PK_DEFAULT_COMPILE_LOG_CHARS;
    o->stderr_chars = PK_DEFAULT_STDERR_CHARS;
    o->summary_chars = PK_DEFAULT_SUMMARY_CHARS;
    for (int i = 0; i < PK_HOOK_COUNT; i++) {
        o->hooks[i].kind = PK_HOOK_BUILTIN;
        o->hooks[i].timeout_ms = PK_DEFAULT_HOOK_TIMEOUT_MS;
    }
    if (!options_json)
        return PK_OK;
    json_error_t jerr;
    json_t *root = json_loads(options_json, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        return pk_error_set(err, PK_ERR_INVALID, "feedback options: invalid JSON at line %d: %s",
                            jerr.line, jerr.text);
    }
    int rc = json_is_object(root)
                 ? opt_apply(root, reg, o, err)
                 : pk_error_set(err, PK_ERR_INVALID, "feedback options: expected a JSON object");
    json_decref(root);
    if (rc != PK_OK)
        pk_summarizer_options_free(o);
    return rc;
}

void pk_summarizer_options_free(pk_summarizer_options *o) {
    for (int i = 0; i < PK_HOOK_COUNT; i++) {
        free(o->hooks[i].path);
        free(o->hooks[i].name);
        o->hooks[i].path = o->hooks[i].name = NULL;
    }
}

/* "builtin", or "plugin:/x.so" / "cmd:/x", as the options spell a hook. */
static char *opt_hook_spelling(const pk_hook *h) {
    if (h->kind == PK_HOOK_BUILTIN)
        return strdup("builtin");
    if (h->name) /* registered: the name, which options accept back (a path they refuse) */
        return strdup(h->name);
    pk_strbuf sb = {0};
    if (pk_strbuf_printf(&sb, "%s:%s", h->kind == PK_HOOK_PLUGIN ? "plugin" : "cmd",
                         h->path ? h->path : "") != PK_OK) {
        pk_strbuf_free(&sb);
        return NULL;
    }
    return pk_strbuf_take(&sb);
}

char *pk_summarizer_settings_json(const pk_summarizer *s) {
    const pk_summarizer_options *o = &s->opt;
    json_t *hooks = json_object();
    for (int i = 0; hooks && i < PK_HOOK_COUNT; i++) {
        char *use = opt_hook_spelling(&o->hooks[i]);
        json_t *h =
            use ? json_pack("{s:s, s:i}", "use", use, "timeout_ms", o->hooks[i].timeout_ms) : NULL;
        free(use);
        if (!h || json_object_set_new(hooks, pk_hook_slot_name((pk_hook_slot)i), h) != 0) {
            json_decref(hooks);
            hooks = NULL;
        }
    }
    json_t *root = hooks ? json_pack("{s:I, s:I, s:I, s:I, s:I, s:o}", "budget_chars",
                                     (json_int_t)o->budget_chars, "budget_tokens",
                                     (json_int_t)o->budget_tokens, "compile_log_chars",
                                     (json_int_t)o->compile_log_chars, "stderr_chars",
                                     (json_int_t)o->stderr_chars, "summary_chars",
                                     (json_int_t)o->summary_chars, "hooks", hooks)
                         : NULL;
    char *text = root ? json_dumps(root, JSON_COMPACT) : NULL;
    json_decref(root);
    return text;
}
