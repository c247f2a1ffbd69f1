/* The next-turn prompt: task, earlier turns in order, the instruction to continue, within the
 * context budget. Over budget, the earliest turns go first (Kevin); when only the latest turn is
 * left and it alone is too long, its code is cut in the middle before it is dropped too. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "summarizer_internal.h"

int pk_summarizer_fits(const pk_summarizer *s, const char *text) {
    if (s->opt.budget_chars > 0 && strlen(text) > (size_t)s->opt.budget_chars)
        return 0;
    return s->opt.budget_tokens <= 0 || pk_approx_tokens(text) <= (size_t)s->opt.budget_tokens;
}

static char *render_turn(const pk_summarizer *s, const pk_turn *t, const char *code) {
    char num[16];
    snprintf(num, sizeof num, "%d", t->turn);
    const char *vars[] = {"turn",     num,
                          "code",     code ? code : "",
                          "summary",  t->summary ? t->summary : "",
                          "feedback", t->feedback ? t->feedback : "",
                          NULL};
    pk_strbuf sb = {0};
    if (pk_template_render(&sb, s->tpl.text[PK_TPL_TURN], vars) != PK_OK) {
        pk_strbuf_free(&sb);
        return NULL;
    }
    return pk_strbuf_take(&sb);
}

/* task + history (turn blocks [first, n) with a note for the dropped ones) + continue. */
static char *assemble(const pk_summarizer *s, const char *task, char **blocks, int first, int n) {
    pk_strbuf turns = {0}, history = {0}, omitted = {0}, out = {0};
    for (int i = first; i < n; i++)
        pk_strbuf_puts(&turns, blocks[i]);
    if (first > 0) {
        char count[16];
        snprintf(count, sizeof count, "%d", first);
        const char *ov[] = {"count", count, NULL};
        pk_template_render(&omitted, s->tpl.text[PK_TPL_OMITTED], ov);
    }
    if (n > 0) {
        const char *hv[] = {"omitted", omitted.data ? omitted.data : "", "turns",
                            turns.data ? turns.data : "", NULL};
        pk_template_render(&history, s->tpl.text[PK_TPL_HISTORY], hv);
    }
    /* Without history, a marker finds the blank line its paragraph would leave. */
    int no_history = history.data == NULL;
    const char *nv[] = {"task",     task,
                        "history",  no_history ? "\x01" : history.data,
                        "continue", s->tpl.text[PK_TPL_CONTINUE],
                        NULL};
    int rc = pk_template_render(&out, s->tpl.text[PK_TPL_NEXT_PROMPT], nv);
    pk_strbuf_free(&turns);
    pk_strbuf_free(&omitted);
    pk_strbuf_free(&history);
    if (rc != PK_OK) {
        pk_strbuf_free(&out);
        return NULL;
    }
    char *mark = no_history ? strchr(out.data, '\x01') : NULL;
    if (mark) {
        size_t drop = mark[1] == '\n' && mark > out.data && mark[-1] == '\n' ? 2 : 1;
        memmove(mark, mark + drop, strlen(mark + drop) + 1);
    }
    return pk_strbuf_take(&out);
}

/* The code with its middle replaced by a marker, keeping keep bytes. */
char *pk_cut_code(const char *code, size_t keep) {
    size_t len = strlen(code);
    if (keep >= len)
        return strdup(code);
    size_t head = keep * 2 / 3, tail = keep - head;
    pk_strbuf sb = {0};
    pk_strbuf_append(&sb, code, head);
    pk_strbuf_printf(&sb, "\n/* ... %zu characters omitted to fit the context ... */\n",
                     len - keep);
    pk_strbuf_append(&sb, code + len - tail, tail);
    return pk_strbuf_take(&sb);
}

/* Shrinks the last turn's code until the prompt fits; NULL if even no code does not fit. */
static char *fit_last_turn(const pk_summarizer *s, const char *task, char **blocks, int n,
                           const pk_turn *last) {
    size_t keep = last->code ? strlen(last->code) : 0;
    for (int attempt = 0; attempt < 12 && keep > 0; attempt++) {
        keep = keep / 2;
        char *code = pk_cut_code(last->code, keep);
        char *block = code ? render_turn(s, last, code) : NULL;
        free(code);
        if (!block)
            return NULL;
        char *saved = blocks[n - 1];
        blocks[n - 1] = block;
        char *prompt = assemble(s, task, blocks, n - 1, n);
        blocks[n - 1] = saved;
        free(block);
        if (prompt && pk_summarizer_fits(s, prompt))
            return prompt;
        free(prompt);
    }
    return NULL;
}

char *pk_builtin_next_prompt(const pk_summarizer *s, const char *task, const pk_turn *turns,
                             int n) {
    char **blocks = calloc((size_t)(n > 0 ? n : 1), sizeof *blocks);
    if (!blocks)
        return NULL;
    char *prompt = NULL;
    int ok = 1;
    for (int i = 0; i < n && ok; i++) {
        blocks[i] = render_turn(s, &turns[i], turns[i].code);
        ok = blocks[i] != NULL;
    }
    for (int first = 0; ok && first <= n; first++) {
        prompt = assemble(s, task, blocks, first, n);
        if (!prompt || pk_summarizer_fits(s, prompt))
            break;
        free(prompt);
        prompt = NULL;
        if (first == n - 1) {
            prompt = fit_last_turn(s, task, blocks, n, &turns[n - 1]);
            if (prompt)
                break;
        }
        if (first == n) {
            /* Not even the task fits: it is never cut, so the budget is exceeded. */
            prompt = assemble(s, task, blocks, n, n);
        }
    }
    for (int i = 0; i < n; i++)
        free(blocks[i]);
    free(blocks);
    return prompt;
}
