/* pk_summarizer: feedback text, reasoning removal, context trimming and pluggable summarizer hooks.
 *
 * One pk_summarizer per episode. Texts come from editable templates (summarizer_hooks/templates);
 * the three hooks (summarize, feedback, history) are the built-in, a C plugin or an external
 * command. The operator registers plugins and commands by name (pk_hook_registry); options_json
 * chooses among those names only, never a path. Hooks run inside pk_sandbox with a timeout:
 * when one crashes, hangs or prints garbage the built-in result is used. See docs/feedback.md
 * and docs/security.md.
 */
#ifndef PK_SUMMARIZER_H
#define PK_SUMMARIZER_H

#include "pk_common.h"
#include "pk_harness.h"
#include "pk_problems.h"
#include "pk_turn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pk_summarizer pk_summarizer; /* per-episode settings + selected hooks */

/* The hooks the operator registered: NAME -> "plugin:/abs/x.so" or "cmd:/abs/prog". */
typedef struct pk_hook_registry pk_hook_registry;
pk_hook_registry *pk_hook_registry_new(void); /* NULL: out of memory */
void pk_hook_registry_free(pk_hook_registry *r);
/* name: 1..64 of [A-Za-z0-9_.-], not "builtin", not registered yet; the file must exist (a
 * command: be executable). PK_ERR_INVALID otherwise. */
int pk_hook_registry_add(pk_hook_registry *r, const char *name, const char *spec, pk_error *err);
/* "NAME=SPEC", as `pkgym serve --hook` takes it. */
int pk_hook_registry_add_arg(pk_hook_registry *r, const char *name_eq_spec, pk_error *err);
/* A JSON object {"NAME": "SPEC", ...} (a feedback config's "hook_registry"). */
int pk_hook_registry_add_json(pk_hook_registry *r, const char *json_object_text, pk_error *err);
const char *pk_hook_registry_spec(const pk_hook_registry *r, const char *name); /* or NULL */
size_t pk_hook_registry_count(const pk_hook_registry *r);
const char *pk_hook_registry_name(const pk_hook_registry *r, size_t i);

typedef struct pk_parsed_action {
    int format_ok;          /* 0: no usable code block (status format_error) */
    char format_error[256]; /* why, when !format_ok */
    char *code;             /* the final code block (NULL if none) */
    char *summary; /* step's summary field, else text after the final block, else extractive;
                    * set for format errors too */
} pk_parsed_action;

/* options_json: the server defaults merged with reset's options["feedback"] (NULL: defaults).
 * Keys: budget_chars, budget_tokens, compile_log_chars, stderr_chars, summary_chars, hooks
 * {summarize, feedback, history: "builtin" | a name registered in hooks, timeout_ms}.
 * templates_dir: the template files (NULL: pk_summarizer_default_templates_dir()).
 * Unknown keys, paths and unregistered names -> PK_ERR_INVALID naming them. The summarizer
 * copies what it uses of hooks (NULL: only "builtin"). */
int pk_summarizer_create_with_hooks(const char *options_json, const pk_hook_registry *hooks,
                                    const char *templates_dir, pk_summarizer **out, pk_error *err);
/* The same without registered hooks. */
int pk_summarizer_create(const char *options_json, const char *templates_dir, pk_summarizer **out,
                         pk_error *err);
void pk_summarizer_free(pk_summarizer *s);

/* Every setting in effect, defaults included, as a JSON object that pk_summarizer_create
 * accepts back: budget_chars, budget_tokens, compile_log_chars, stderr_chars, summary_chars,
 * hooks {summarize, feedback, history: {use, timeout_ms}}. malloc'd; NULL only when out of
 * memory. */
char *pk_summarizer_settings_json(const pk_summarizer *s);

/* Optional: the problem this episode is about. With an entry name, parse_action also requires
 * the code to mention it; the id is passed to hooks. Strings are copied. */
int pk_summarizer_set_problem(pk_summarizer *s, const char *problem_id, const char *entry,
                              pk_error *err);

/* The first-turn prompt: the task, then the format example. malloc'd; NULL only when out of
 * memory. */
char *pk_summarizer_first_prompt(pk_summarizer *s, const char *task_prompt);

/* Removes reasoning (<think>...</think>, or everything before the final code block), extracts
 * the final code block and picks the summary. A format problem is not an error: it returns PK_OK
 * with out->format_ok = 0. Non-zero only for bad arguments or no memory. */
int pk_summarizer_parse_action(pk_summarizer *s, const char *action, const char *summary_field,
                               pk_parsed_action *out, pk_error *err);
void pk_parsed_action_free(pk_parsed_action *a);

/* This turn's feedback, specific and short. p may be NULL. malloc'd; NULL only when out of
 * memory. */
char *pk_summarizer_feedback(pk_summarizer *s, const pk_eval_result *r, const pk_problem *p);

/* The next-turn prompt: task, earlier turns in order (their number, code, summary and feedback:
 * the rest of each pk_turn is not read), the instruction to continue; earliest turns dropped
 * first to stay within budget. malloc'd. */
char *pk_summarizer_next_prompt(pk_summarizer *s, const char *task_prompt, const pk_turn *turns,
                                int n_turns);

/* 1 when text is within this episode's context budget (budget_chars, budget_tokens): what
 * callers that add to a prompt (archive examples, which go first) check against. */
int pk_summarizer_within_budget(const pk_summarizer *s, const char *text);

/* One chat message: role is "system", "user" or "assistant" (static); content is malloc'd. */
typedef struct pk_chat_message {
    const char *role;
    char *content;
} pk_chat_message;

/* The conversation so far as chat messages, for trainers that apply their own chat template:
 * system; user (the first prompt: task and format example); then for each turn an assistant
 * message (its code and summary, reasoning removed) and a user message (its feedback and the
 * instruction to continue). Within the same budgets as next_prompt, counted over all contents:
 * the earliest turns are dropped first (the first user message then says how many), and when
 * only the latest is left and too long its code is cut in the middle. The history hook does not
 * apply. *out is malloc'd (pk_chat_messages_free). */
int pk_summarizer_messages(pk_summarizer *s, const char *task_prompt, const pk_turn *turns,
                           int n_turns, pk_chat_message **out, int *n_out, pk_error *err);
void pk_chat_messages_free(pk_chat_message *m, int n);

/* The last hook failure of this summarizer ("" if none): what failed and that the built-in was
 * used instead. Also counted in pk_summarizer_hook_fallbacks(). */
const char *pk_summarizer_last_hook_error(const pk_summarizer *s);
int pk_summarizer_hook_fallbacks(const pk_summarizer *s);

/* Condenses a compiler log: sandbox paths stripped, duplicate and cascading errors folded, the
 * first errors kept with their source lines, the whole within max_chars. malloc'd. */
char *pk_condense_compile_log(const char *log, size_t max_chars);

/* Approximate token count used by budget_tokens (documented in docs/feedback.md). */
size_t pk_approx_tokens(const char *text);

/* The source tree's template directory, baked in at build time. */
const char *pk_summarizer_default_templates_dir(void);

#ifdef __cplusplus
}
#endif
#endif
