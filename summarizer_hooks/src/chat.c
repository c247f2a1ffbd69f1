/* The conversation as chat messages (pk_summarizer_messages): the same turns and budgets as the
 * next-turn prompt, in the shape chat templates expect. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "summarizer_internal.h"

static char *render(const char *tpl, const char *const *vars) {
    pk_strbuf sb = {0};
    if (pk_template_render(&sb, tpl, vars) != PK_OK) {
        pk_strbuf_free(&sb);
        return NULL;
    }
    return pk_strbuf_take(&sb);
}

static char *render_assistant(const pk_summarizer *s, const pk_turn *t, const char *code) {
    const char *vars[] = {"code", code ? code : "", "summary", t->summary ? t->summary : "", NULL};
    return render(s->tpl.text[PK_TPL_CHAT_ASSISTANT], vars);
}

static char *render_feedback(const pk_summarizer *s, const pk_turn *t) {
    char num[16];
    snprintf(num, sizeof num, "%d", t->turn);
    const char *vars[] = {"turn",     num,
                          "feedback", t->feedback ? t->feedback : "",
                          "continue", s->tpl.text[PK_TPL_CONTINUE],
                          NULL};
    return render(s->tpl.text[PK_TPL_CHAT_FEEDBACK], vars);
}

/* The first user message: the first prompt, and the note when `omitted` turns were dropped. */
static char *render_first_user(pk_summarizer *s, const char *task, int omitted) {
    char *first = pk_summarizer_first_prompt(s, task);
    if (!first || omitted == 0)
        return first;
    char count[16];
    snprintf(count, sizeof count, "%d", omitted);
    const char *ov[] = {"count", count, NULL};
    pk_strbuf sb = {0};
    int rc = pk_strbuf_puts(&sb, first);
    rc = rc ? rc : pk_strbuf_puts(&sb, "\n\n");
    rc = rc ? rc : pk_template_render(&sb, s->tpl.text[PK_TPL_OMITTED], ov);
    free(first);
    if (rc != PK_OK) {
        pk_strbuf_free(&sb);
        return NULL;
    }
    return pk_strbuf_take(&sb);
}

static int fits_all(const pk_summarizer *s, const pk_chat_message *m, int n) {
    size_t chars = 0, tokens = 0;
    for (int i = 0; i < n; i++) {
        chars += strlen(m[i].content);
        tokens += pk_approx_tokens(m[i].content);
    }
    return (s->opt.budget_chars <= 0 || chars <= (size_t)s->opt.budget_chars) &&
           (s->opt.budget_tokens <= 0 || tokens <= (size_t)s->opt.budget_tokens);
}

static void clear(pk_chat_message *m, int n) {
    for (int i = 0; i < n; i++) {
        free(m[i].content);
        m[i].content = NULL;
    }
}

/* Fills m with system, first user and the turns [first, n); returns the count, -1 on no memory.
 * last_code replaces the latest turn's code when non-NULL. */
static int assemble(pk_summarizer *s, const char *task, const pk_turn *turns, int n, int first,
                    const char *last_code, pk_chat_message *m) {
    int k = 0;
    m[k++] = (pk_chat_message){"system", strdup(s->tpl.text[PK_TPL_CHAT_SYSTEM])};
    m[k++] = (pk_chat_message){"user", render_first_user(s, task, first)};
    for (int i = first; i < n; i++) {
        const char *code = i == n - 1 && last_code ? last_code : turns[i].code;
        m[k++] = (pk_chat_message){"assistant", render_assistant(s, &turns[i], code)};
        m[k++] = (pk_chat_message){"user", render_feedback(s, &turns[i])};
    }
    for (int i = 0; i < k; i++) {
        if (!m[i].content) {
            clear(m, k);
            return -1;
        }
    }
    return k;
}

/* Only the latest turn is left and too long: cut its code in halves until it fits. */
static int fit_last_turn(pk_summarizer *s, const char *task, const pk_turn *turns, int n,
                         pk_chat_message *m) {
    const char *code = turns[n - 1].code;
    size_t keep = code ? strlen(code) : 0;
    for (int attempt = 0; attempt < 12 && keep > 0; attempt++) {
        keep /= 2;
        char *cut = pk_cut_code(code, keep);
        if (!cut)
            return -1;
        int k = assemble(s, task, turns, n, n - 1, cut, m);
        free(cut);
        if (k < 0 || fits_all(s, m, k))
            return k;
        clear(m, k);
    }
    return 0;
}

int pk_summarizer_messages(pk_summarizer *s, const char *task_prompt, const pk_turn *turns,
                           int n_turns, pk_chat_message **out, int *n_out, pk_error *err) {
    if (!s || !task_prompt || !out || !n_out || n_turns < 0 || (n_turns > 0 && !turns))
        return pk_error_set(err, PK_ERR_INVALID, "pk_summarizer_messages: bad arguments");
    *out = NULL;
    *n_out = 0;
    pk_chat_message *m = calloc((size_t)(2 + 2 * n_turns), sizeof *m);
    if (!m)
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    int k = 0;
    for (int first = 0; first <= n_turns; first++) {
        k = assemble(s, task_prompt, turns, n_turns, first, NULL, m);
        if (k < 0 || fits_all(s, m, k))
            break;
        clear(m, k);
        if (first == n_turns - 1) {
            k = fit_last_turn(s, task_prompt, turns, n_turns, m);
            if (k != 0)
                break;
        }
        if (first == n_turns) {
            /* Not even the system and first messages fit: they are never cut. */
            k = assemble(s, task_prompt, turns, n_turns, n_turns, NULL, m);
        }
    }
    if (k < 0) {
        free(m);
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory building chat messages");
    }
    *out = m;
    *n_out = k;
    return PK_OK;
}

void pk_chat_messages_free(pk_chat_message *m, int n) {
    if (!m)
        return;
    for (int i = 0; i < n; i++) {
        free(m[i].content);
        m[i].content = NULL;
    }
    free(m);
}
