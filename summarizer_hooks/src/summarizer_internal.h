/* Internal to pk_summarizer: the summarizer's state and the helpers its files share. */
#ifndef PK_SUMMARIZER_INTERNAL_H
#define PK_SUMMARIZER_INTERNAL_H

#include <stddef.h>

#include "pk_summarizer.h"

/* Templates: one file per text, {{name}} placeholders (see templates.c for the list). */
typedef enum pk_tpl_id {
    PK_TPL_FIRST_PROMPT,
    PK_TPL_FORMAT_EXAMPLE,
    PK_TPL_NEXT_PROMPT,
    PK_TPL_HISTORY,
    PK_TPL_TURN,
    PK_TPL_OMITTED,
    PK_TPL_CONTINUE,
    PK_TPL_FB_FORMAT_ERROR,
    PK_TPL_FB_REJECTED,
    PK_TPL_FB_COMPILE_ERROR,
    PK_TPL_FB_RUNTIME_ERROR,
    PK_TPL_FB_TIMEOUT,
    PK_TPL_FB_INCORRECT,
    PK_TPL_FB_CORRECT,
    PK_TPL_FB_CORRECT_UNTIMED,
    PK_TPL_FRAG_TRIAL,
    PK_TPL_FRAG_MISMATCH,
    PK_TPL_FRAG_OTHER_RANKS,
    PK_TPL_FRAG_INPUTS_MODIFIED,
    PK_TPL_FRAG_ROOFLINE,
    PK_TPL_CHAT_SYSTEM,
    PK_TPL_CHAT_ASSISTANT,
    PK_TPL_CHAT_FEEDBACK,
    PK_TPL_COUNT
} pk_tpl_id;

typedef struct pk_templates {
    char *text[PK_TPL_COUNT];
} pk_templates;

int pk_templates_load(pk_templates *t, const char *dir, pk_error *err);
void pk_templates_free(pk_templates *t);
/* Appends tpl with each {{name}} replaced by its value from vars (name, value, ..., NULL);
 * a name not in vars renders empty. */
int pk_template_render(pk_strbuf *out, const char *tpl, const char *const *vars);

/* Hooks. */
typedef enum pk_hook_slot {
    PK_HOOK_SUMMARIZE,
    PK_HOOK_FEEDBACK,
    PK_HOOK_HISTORY,
    PK_HOOK_COUNT
} pk_hook_slot;
typedef enum pk_hook_kind { PK_HOOK_BUILTIN, PK_HOOK_PLUGIN, PK_HOOK_COMMAND } pk_hook_kind;

typedef struct pk_hook {
    pk_hook_kind kind;
    char *name; /* the registered name */
    char *path; /* plugin .so or command */
    int timeout_ms;
} pk_hook;

/* Registry helpers (hook_registry.c). */
int pk_hook_name_valid(const char *name);
/* "plugin:/x" or "cmd:/x" -> kind and the path inside spec; -1 for anything else. */
int pk_hook_spec_split(const char *spec, pk_hook_kind *kind, const char **path);

typedef struct pk_summarizer_options {
    long budget_chars;  /* 0: no character budget */
    long budget_tokens; /* 0: no token budget */
    long compile_log_chars;
    long stderr_chars;
    long summary_chars;
    pk_hook hooks[PK_HOOK_COUNT];
} pk_summarizer_options;

/* Parses options_json over the defaults; unknown keys are PK_ERR_INVALID naming them. Hooks are
 * names in reg (NULL: only "builtin"). */
int pk_summarizer_options_parse(const char *options_json, const pk_hook_registry *reg,
                                pk_summarizer_options *o, pk_error *err);
void pk_summarizer_options_free(pk_summarizer_options *o);

struct pk_summarizer {
    pk_summarizer_options opt;
    pk_templates tpl;
    char *problem_id;
    char *entry;
    char last_hook_error[512];
    int hook_fallbacks;
};

/* Runs argv[0] inside pk_sandbox (no network, read-only file system but a private work dir and
 * tmp, rlimits) with input on stdin and collects stdout; ro: host paths it may read besides the
 * system's (NULL-terminated). Killed after timeout_ms. Fails on timeout, a signal, the memory
 * limit, more than max_out bytes or a sandbox that could not start; otherwise *exit_code gets
 * the exit code. */
int pk_hook_exec(char *const argv[], const char *const ro[], const char *input, size_t input_len,
                 int timeout_ms, size_t max_out, char **out, int *exit_code, pk_error *err);

/* Calls the hook in slot with request_json (a JSON object without "builtin", which is added).
 * Returns the hook's text, or NULL when the slot is the built-in, or the hook failed or declined
 * (failures are recorded in s->last_hook_error). */
char *pk_hook_call(pk_summarizer *s, pk_hook_slot slot, void *request_json_object,
                   const char *builtin);
const char *pk_hook_slot_name(pk_hook_slot slot);
void pk_hook_record_failure(pk_summarizer *s, pk_hook_slot slot, const char *what);
/* Exit code of the plugin host when the plugin leaves a hook to the built-in. */
#define PK_HOOK_EXIT_DECLINED 3

/* The three hooks: each builds its request and returns the hook's text or NULL (built-in). */
int pk_summarize_hook(pk_summarizer *s, const char *action, const char *summary_field,
                      pk_parsed_action *out, pk_error *err);
char *pk_feedback_hook(pk_summarizer *s, const pk_eval_result *r, const char *builtin);
char *pk_history_hook(pk_summarizer *s, const char *task, const pk_turn *turns, int n,
                      const char *builtin);

/* The built-ins. */
char *pk_builtin_feedback(const pk_summarizer *s, const pk_eval_result *r);
char *pk_builtin_next_prompt(const pk_summarizer *s, const char *task, const pk_turn *turns, int n);
int pk_summarizer_fits(const pk_summarizer *s, const char *text); /* within both budgets */
/* The code with its middle replaced by a marker, keeping keep bytes (history.c). */
char *pk_cut_code(const char *code, size_t keep);
/* Path of the plugin host executable ($PKGYM_SUMMARIZER_HOOK_HOST overrides the built-in). */
const char *pk_hook_host_path(void);

/* Text helpers. */
char *pk_strip_sandbox_paths(const char *text); /* absolute paths -> file names */
char *pk_strndup_trim(const char *s, size_t n); /* copy without surrounding whitespace */
/* Copies at most max_chars bytes of text, cutting at a UTF-8 boundary and ending in "..." when
 * cut. */
char *pk_text_cap(const char *text, size_t max_chars);
char *pk_builtin_extractive_summary(const char *code, size_t max_chars);

#endif
