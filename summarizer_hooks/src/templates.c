/* Loading and rendering of the editable template files. Each template is checked at load time
 * against the placeholders the code fills, so a typo in an edited file is an error, not a
 * silently empty field. */
#include <stdlib.h>
#include <string.h>

#include "summarizer_internal.h"

typedef struct pk_tpl_spec {
    const char *file;
    const char *vars; /* space-separated placeholder names the code fills */
} pk_tpl_spec;

static const pk_tpl_spec pk_tpl_specs[PK_TPL_COUNT] = {
    [PK_TPL_FIRST_PROMPT] = {"first_prompt.txt", "task format_example"},
    [PK_TPL_FORMAT_EXAMPLE] = {"format_example.txt", ""},
    [PK_TPL_NEXT_PROMPT] = {"next_prompt.txt", "task history continue"},
    [PK_TPL_HISTORY] = {"history.txt", "omitted turns"},
    [PK_TPL_TURN] = {"turn.txt", "turn code summary feedback"},
    [PK_TPL_OMITTED] = {"omitted.txt", "count"},
    [PK_TPL_CONTINUE] = {"continue.txt", ""},
    [PK_TPL_FB_FORMAT_ERROR] = {"feedback_format_error.txt", "reason"},
    [PK_TPL_FB_REJECTED] = {"feedback_rejected.txt", "rule reason"},
    [PK_TPL_FB_COMPILE_ERROR] = {"feedback_compile_error.txt", "log"},
    [PK_TPL_FB_RUNTIME_ERROR] = {"feedback_runtime_error.txt", "reason exit output"},
    [PK_TPL_FB_TIMEOUT] = {"feedback_timeout.txt", "ranks world_size reason"},
    [PK_TPL_FB_INCORRECT] = {"feedback_incorrect.txt", "details"},
    [PK_TPL_FB_CORRECT] = {"feedback_correct.txt", "time_us baseline_us speedup roofline"},
    [PK_TPL_FB_CORRECT_UNTIMED] = {"feedback_correct_untimed.txt", ""},
    [PK_TPL_FRAG_TRIAL] = {"fragment_trial.txt", "trial n_trials n_failed others max_abs max_rel"},
    [PK_TPL_FRAG_MISMATCH] = {"fragment_mismatch.txt", "rank arg index expected got"},
    [PK_TPL_FRAG_OTHER_RANKS] = {"fragment_other_ranks.txt", "ranks"},
    [PK_TPL_FRAG_INPUTS_MODIFIED] = {"fragment_inputs_modified.txt", ""},
    [PK_TPL_FRAG_ROOFLINE] = {"fragment_roofline.txt", "percent no_overlap_us floor_us"},
    [PK_TPL_CHAT_SYSTEM] = {"chat_system.txt", ""},
    [PK_TPL_CHAT_ASSISTANT] = {"chat_assistant.txt", "code summary"},
    [PK_TPL_CHAT_FEEDBACK] = {"chat_feedback.txt", "turn feedback continue"},
};

static int tpl_var_allowed(const char *vars, const char *name, size_t len) {
    const char *p = vars;
    while (*p) {
        size_t n = strcspn(p, " ");
        if (n == len && strncmp(p, name, len) == 0)
            return 1;
        p += n;
        p += strspn(p, " ");
    }
    return 0;
}

static int tpl_check(const char *text, const pk_tpl_spec *spec, const char *path, pk_error *err) {
    const char *p = text;
    while ((p = strstr(p, "{{")) != NULL) {
        const char *name = p + 2;
        const char *end = strstr(name, "}}");
        if (!end)
            return pk_error_set(err, PK_ERR_INVALID, "template %s: unterminated {{", path);
        size_t len = (size_t)(end - name);
        if (!tpl_var_allowed(spec->vars, name, len)) {
            return pk_error_set(
                err, PK_ERR_INVALID, "template %s: unknown placeholder {{%.*s}} (allowed: %s)",
                path, (int)(len > 64 ? 64 : len), name, spec->vars[0] ? spec->vars : "none");
        }
        p = end + 2;
    }
    return PK_OK;
}

int pk_templates_load(pk_templates *t, const char *dir, pk_error *err) {
    memset(t, 0, sizeof *t);
    for (int i = 0; i < PK_TPL_COUNT; i++) {
        char *path = pk_path_join(dir, pk_tpl_specs[i].file);
        if (!path) {
            pk_templates_free(t);
            return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
        }
        size_t len = 0;
        int rc = pk_read_file(path, &t->text[i], &len, err);
        if (rc == PK_OK) {
            /* Files end in a newline that is not part of the text. */
            if (len > 0 && t->text[i][len - 1] == '\n')
                t->text[i][len - 1] = '\0';
            rc = tpl_check(t->text[i], &pk_tpl_specs[i], path, err);
        }
        free(path);
        if (rc != PK_OK) {
            pk_templates_free(t);
            return rc;
        }
    }
    return PK_OK;
}

void pk_templates_free(pk_templates *t) {
    for (int i = 0; i < PK_TPL_COUNT; i++) {
        free(t->text[i]);
        t->text[i] = NULL;
    }
}

static const char *tpl_lookup(const char *const *vars, const char *name, size_t len) {
    for (size_t i = 0; vars && vars[i]; i += 2) {
        if (strlen(vars[i]) == len && strncmp(vars[i], name, len) == 0)
            return vars[i + 1] ? vars[i + 1] : "";
    }
    return "";
}

int pk_template_render(pk_strbuf *out, const char *tpl, const char *const *vars) {
    const char *p = tpl;
    for (;;) {
        const char *open = strstr(p, "{{");
        const char *close = open ? strstr(open + 2, "}}") : NULL;
        if (!close)
            return pk_strbuf_puts(out, p);
        if (pk_strbuf_append(out, p, (size_t)(open - p)) != PK_OK)
            return PK_ERR_NOMEM;
        const char *value = tpl_lookup(vars, open + 2, (size_t)(close - open - 2));
        if (pk_strbuf_puts(out, value) != PK_OK)
            return PK_ERR_NOMEM;
        p = close + 2;
    }
}
