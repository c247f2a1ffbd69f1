/* Example plugin "terse": one-line feedback ("status: detail") and one-sentence summaries. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_summarizer_plugin.h"

#define TERSE_MAX 200

/* The first line of text, at most max bytes. */
static char *first_line(const char *text, size_t max) {
    size_t n = strcspn(text, "\n");
    n = n < max ? n : max;
    char *s = malloc(n + 1);
    if (s) {
        memcpy(s, text, n);
        s[n] = '\0';
    }
    return s;
}

static char *terse_feedback(const pk_summarizer_plugin_request *req) {
    json_t *root = json_loads(req->request_json, 0, NULL);
    json_t *result = json_object_get(root, "result");
    const char *status = json_string_value(json_object_get(result, "status"));
    const char *reason = json_string_value(json_object_get(result, "reason"));
    const char *log = json_string_value(json_object_get(result, "compile_log"));
    json_t *timing = json_object_get(result, "timing");
    char buf[TERSE_MAX + 64];
    if (!status) {
        json_decref(root);
        return NULL; /* not a request we understand: the built-in text stays */
    }
    if (timing && strcmp(status, "correct") == 0) {
        snprintf(buf, sizeof buf, "correct: %.1f us vs baseline %.1f us (%.2fx)",
                 json_real_value(json_object_get(timing, "time_us")),
                 json_real_value(json_object_get(timing, "baseline_us")),
                 json_real_value(json_object_get(timing, "speedup")));
    } else {
        const char *detail = log && log[0] ? log : reason && reason[0] ? reason : req->builtin;
        char *line = first_line(detail, TERSE_MAX);
        snprintf(buf, sizeof buf, "%s: %s", status, line ? line : "");
        free(line);
    }
    json_decref(root);
    return strdup(buf);
}

/* The first sentence of the built-in summary. */
static char *terse_summarize(const pk_summarizer_plugin_request *req) {
    const char *text = req->builtin;
    size_t n = strcspn(text, ".\n");
    if (text[n] == '.')
        n++;
    char *line = first_line(text, n < 120 ? n : 120);
    return line;
}

static const pk_summarizer_plugin terse = {
    .abi_version = PK_SUMMARIZER_PLUGIN_ABI_VERSION,
    .name = "terse",
    .summarize = terse_summarize,
    .feedback = terse_feedback,
    .history = NULL,
};

const pk_summarizer_plugin *pk_summarizer_plugin_v1(void);
const pk_summarizer_plugin *pk_summarizer_plugin_v1(void) {
    return &terse;
}
