/* Calling a plugin or command hook and checking its answer; any failure means the built-in. */
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_install.h"
#include "summarizer_internal.h"

#define PK_HOOK_MAX_OUTPUT (1u << 20)

const char *pk_hook_slot_name(pk_hook_slot slot) {
    static const char *const names[PK_HOOK_COUNT] = {"summarize", "feedback", "history"};
    return slot < PK_HOOK_COUNT ? names[slot] : "?";
}

static char hook_host_default[4096];
static pthread_once_t hook_host_once = PTHREAD_ONCE_INIT;

static void hook_host_init(void) {
    pk_install_path(PK_INSTALL_LIBEXEC, "pk_summarizer_hook_host", PK_SUMMARIZER_HOOK_HOST,
                    hook_host_default, sizeof hook_host_default);
}

const char *pk_hook_host_path(void) {
    const char *env = getenv("PKGYM_SUMMARIZER_HOOK_HOST");
    if (env && env[0])
        return env;
    pthread_once(&hook_host_once, hook_host_init);
    return hook_host_default;
}

void pk_hook_record_failure(pk_summarizer *s, pk_hook_slot slot, const char *what) {
    const pk_hook *h = &s->opt.hooks[slot];
    snprintf(s->last_hook_error, sizeof s->last_hook_error,
             "%s hook %s (%s:%s) failed: %s; used the built-in", pk_hook_slot_name(slot),
             h->name ? h->name : "?", h->kind == PK_HOOK_PLUGIN ? "plugin" : "cmd",
             h->path ? h->path : "?", what);
    s->hook_fallbacks++;
    fprintf(stderr, "pkgym: %s\n", s->last_hook_error);
}

/* The answer is {"text": "..."}; the plugin host reports its own failures as {"error": "..."}. */
static char *hook_answer(pk_summarizer *s, pk_hook_slot slot, const char *out, int exit_code) {
    json_error_t jerr;
    json_t *root = json_loads(out, 0, &jerr);
    json_t *text = root ? json_object_get(root, "text") : NULL;
    json_t *error = root ? json_object_get(root, "error") : NULL;
    char what[320];
    char *result = NULL;
    if (exit_code == PK_HOOK_EXIT_DECLINED) {
        json_decref(root);
        return NULL; /* the plugin leaves this hook to the built-in */
    }
    if (exit_code != 0) {
        snprintf(what, sizeof what, "exited with code %d%s%.200s", exit_code,
                 json_is_string(error) ? ": " : "",
                 json_is_string(error) ? json_string_value(error) : "");
    } else if (!json_is_string(text)) {
        char shown[64];
        snprintf(shown, sizeof shown, "%s", out[0] ? out : "(nothing)");
        for (char *c = shown; *c; c++) {
            *c = (unsigned char)*c < 0x20 ? ' ' : *c; /* one line in the log */
        }
        snprintf(what, sizeof what, "printed something other than {\"text\": \"...\"}: %s", shown);
    } else {
        result = strdup(json_string_value(text));
        what[0] = '\0';
    }
    json_decref(root);
    if (!result && what[0])
        pk_hook_record_failure(s, slot, what);
    return result;
}

char *pk_hook_call(pk_summarizer *s, pk_hook_slot slot, void *request_json_object,
                   const char *builtin) {
    json_t *req = request_json_object;
    const pk_hook *h = &s->opt.hooks[slot];
    if (h->kind == PK_HOOK_BUILTIN || !req) {
        json_decref(req);
        return NULL;
    }
    json_object_set_new(req, "hook", json_string(pk_hook_slot_name(slot)));
    json_object_set_new(req, "abi_version", json_integer(1));
    json_object_set_new(req, "problem_id",
                        s->problem_id ? json_string(s->problem_id) : json_null());
    json_object_set_new(req, "builtin", json_string(builtin ? builtin : ""));
    char *input = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    if (!input) {
        pk_hook_record_failure(s, slot, "could not encode the request (invalid UTF-8?)");
        return NULL;
    }
    const char *host = pk_hook_host_path();
    char *argv_plugin[] = {(char *)host, h->path, (char *)pk_hook_slot_name(slot), NULL};
    char *argv_cmd[] = {h->path, (char *)pk_hook_slot_name(slot), NULL};
    /* Inside the sandbox the hook sees the system's directories and, read-only, its own file
     * (and the plugin host's): not its neighbours, which could be the operator's keys. */
    const char *ro[] = {h->path, h->kind == PK_HOOK_PLUGIN ? host : NULL, NULL};
    char *out = NULL;
    int exit_code = -1;
    pk_error err = {0};
    int rc = pk_hook_exec(h->kind == PK_HOOK_PLUGIN ? argv_plugin : argv_cmd, ro, input,
                          strlen(input), h->timeout_ms, PK_HOOK_MAX_OUTPUT, &out, &exit_code, &err);
    free(input);
    char *text = NULL;
    if (rc != PK_OK)
        pk_hook_record_failure(s, slot, err.message);
    else
        text = hook_answer(s, slot, out, exit_code);
    free(out);
    return text;
}
