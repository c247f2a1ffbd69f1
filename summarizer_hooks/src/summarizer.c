/* The public API: per-episode summarizer, prompts and feedback, each through its hook. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "pk_install.h"
#include "summarizer_internal.h"

static char templates_dir_default[4096];
static pthread_once_t templates_dir_once = PTHREAD_ONCE_INIT;

static void templates_dir_init(void) {
    pk_install_path(PK_INSTALL_DATA, "templates", PK_SUMMARIZER_TEMPLATES_DIR,
                    templates_dir_default, sizeof templates_dir_default);
}

const char *pk_summarizer_default_templates_dir(void) {
    pthread_once(&templates_dir_once, templates_dir_init);
    return templates_dir_default;
}

int pk_summarizer_create(const char *options_json, const char *templates_dir, pk_summarizer **out,
                         pk_error *err) {
    return pk_summarizer_create_with_hooks(options_json, NULL, templates_dir, out, err);
}

int pk_summarizer_create_with_hooks(const char *options_json, const pk_hook_registry *hooks,
                                    const char *templates_dir, pk_summarizer **out, pk_error *err) {
    if (!out)
        return pk_error_set(err, PK_ERR_INVALID, "pk_summarizer_create: out is NULL");
    *out = NULL;
    pk_summarizer *s = calloc(1, sizeof *s);
    if (!s)
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    int rc = pk_summarizer_options_parse(options_json, hooks, &s->opt, err);
    if (rc == PK_OK) {
        rc = pk_templates_load(
            &s->tpl, templates_dir ? templates_dir : pk_summarizer_default_templates_dir(), err);
        if (rc != PK_OK)
            pk_summarizer_options_free(&s->opt);
    }
    if (rc != PK_OK) {
        free(s);
        return rc;
    }
    *out = s;
    return PK_OK;
}

void pk_summarizer_free(pk_summarizer *s) {
    if (!s)
        return;
    pk_summarizer_options_free(&s->opt);
    pk_templates_free(&s->tpl);
    free(s->problem_id);
    free(s->entry);
    free(s);
}

int pk_summarizer_set_problem(pk_summarizer *s, const char *problem_id, const char *entry,
                              pk_error *err) {
    if (!s)
        return pk_error_set(err, PK_ERR_INVALID, "pk_summarizer_set_problem: summarizer is NULL");
    char *id = problem_id ? strdup(problem_id) : NULL;
    char *en = entry && entry[0] ? strdup(entry) : NULL;
    if ((problem_id && !id) || (entry && entry[0] && !en)) {
        free(id);
        free(en);
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    }
    free(s->problem_id);
    free(s->entry);
    s->problem_id = id;
    s->entry = en;
    return PK_OK;
}

char *pk_summarizer_first_prompt(pk_summarizer *s, const char *task_prompt) {
    if (!s)
        return NULL;
    const char *vars[] = {"task", task_prompt ? task_prompt : "", "format_example",
                          s->tpl.text[PK_TPL_FORMAT_EXAMPLE], NULL};
    pk_strbuf sb = {0};
    if (pk_template_render(&sb, s->tpl.text[PK_TPL_FIRST_PROMPT], vars) != PK_OK) {
        pk_strbuf_free(&sb);
        return NULL;
    }
    return pk_strbuf_take(&sb);
}

char *pk_summarizer_feedback(pk_summarizer *s, const pk_eval_result *r, const pk_problem *p) {
    (void)p; /* the problem's id and entry come from pk_summarizer_set_problem */
    if (!s || !r)
        return NULL;
    char *builtin = pk_builtin_feedback(s, r);
    if (!builtin)
        return NULL;
    char *hooked = pk_feedback_hook(s, r, builtin);
    if (!hooked)
        return builtin;
    free(builtin);
    return hooked;
}

char *pk_summarizer_next_prompt(pk_summarizer *s, const char *task_prompt, const pk_turn *turns,
                                int n_turns) {
    if (!s || n_turns < 0 || (n_turns > 0 && !turns))
        return NULL;
    const char *task = task_prompt ? task_prompt : "";
    char *builtin = pk_builtin_next_prompt(s, task, turns, n_turns);
    if (!builtin)
        return NULL;
    char *hooked = pk_history_hook(s, task, turns, n_turns, builtin);
    if (!hooked)
        return builtin;
    free(builtin);
    return hooked;
}

const char *pk_summarizer_last_hook_error(const pk_summarizer *s) {
    return s ? s->last_hook_error : "";
}

int pk_summarizer_hook_fallbacks(const pk_summarizer *s) {
    return s ? s->hook_fallbacks : 0;
}

int pk_summarizer_within_budget(const pk_summarizer *s, const char *text) {
    return s && text && pk_summarizer_fits(s, text);
}
