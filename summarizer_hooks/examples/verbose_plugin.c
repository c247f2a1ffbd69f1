/* Example plugin "verbose": the built-in feedback plus every check, every trial and the timing
 * spread, the status and its reason; the summary plus the size of the code. */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_summarizer_plugin.h"

typedef struct text {
    char *data;
    size_t len;
} text;

static void add(text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(text *t, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *grown = n < 0 ? NULL : realloc(t->data, t->len + (size_t)n + 1);
    if (!grown)
        return;
    va_start(ap, fmt);
    vsnprintf(grown + t->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    t->data = grown;
    t->len += (size_t)n;
}

static void add_checks(text *t, json_t *result) {
    json_t *checks = json_object_get(result, "checks");
    size_t i;
    json_t *c;
    json_array_foreach(checks, i, c) {
        add(t, "%s %s: %s%s%s",
            i ? ";" : "\nChecks:", json_string_value(json_object_get(c, "name")),
            json_is_true(json_object_get(c, "passed")) ? "ok" : "FAILED",
            json_string_length(json_object_get(c, "detail")) ? " - " : "",
            json_string_length(json_object_get(c, "detail"))
                ? json_string_value(json_object_get(c, "detail"))
                : "");
    }
}

static void add_trials(text *t, json_t *result) {
    json_t *trials = json_object_get(result, "trials");
    size_t i;
    json_t *tr;
    json_array_foreach(trials, i, tr) {
        add(t, "%s trial %zu %s (max abs %.3g, max rel %.3g)", i ? ";" : "\nTrials:", i + 1,
            json_is_true(json_object_get(tr, "passed")) ? "passed" : "FAILED",
            json_real_value(json_object_get(tr, "max_abs_err")),
            json_real_value(json_object_get(tr, "max_rel_err")));
    }
}

static char *verbose_feedback(const pk_summarizer_plugin_request *req) {
    json_t *root = json_loads(req->request_json, 0, NULL);
    json_t *result = json_object_get(root, "result");
    if (!result) {
        json_decref(root);
        return NULL;
    }
    text t = {0};
    add(&t, "%s", req->builtin);
    const char *reason = json_string_value(json_object_get(result, "reason"));
    add(&t, "\nStatus: %s%s%s%s", json_string_value(json_object_get(result, "status")),
        reason && reason[0] ? " (" : "", reason ? reason : "", reason && reason[0] ? ")" : "");
    add_checks(&t, result);
    add_trials(&t, result);
    json_t *timing = json_object_get(result, "timing");
    if (timing) {
        add(&t, "\nTiming spread (coefficient of variation): %.1f%%",
            100.0 * json_real_value(json_object_get(timing, "cv")));
    }
    json_decref(root);
    return t.data;
}

static char *verbose_summarize(const pk_summarizer_plugin_request *req) {
    json_t *root = json_loads(req->request_json, 0, NULL);
    const char *code = json_string_value(json_object_get(root, "code"));
    int lines = 0;
    for (const char *p = code ? code : ""; *p; p++)
        lines += *p == '\n';
    text t = {0};
    add(&t, "%s (code: %d lines)", req->builtin, code ? lines + 1 : 0);
    json_decref(root);
    return t.data;
}

static const pk_summarizer_plugin verbose = {
    .abi_version = PK_SUMMARIZER_PLUGIN_ABI_VERSION,
    .name = "verbose",
    .summarize = verbose_summarize,
    .feedback = verbose_feedback,
    .history = NULL,
};

const pk_summarizer_plugin *pk_summarizer_plugin_v1(void);
const pk_summarizer_plugin *pk_summarizer_plugin_v1(void) {
    return &verbose;
}
