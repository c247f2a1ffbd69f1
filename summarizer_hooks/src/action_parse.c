/* Parsing a model's action: reasoning removal, the final code block, the summary. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "summarizer_internal.h"

#define PK_THINK_OPEN "<think>"
#define PK_THINK_CLOSE "</think>"

/* Removes <think>...</think> spans in place. A leading "</think>" with no opening tag means the
 * reasoning began in the prompt; an unterminated "<think>" swallows the rest of the answer. */
static void remove_think(char *text, int *unterminated) {
    *unterminated = 0;
    char *open = strstr(text, PK_THINK_OPEN);
    char *close = strstr(text, PK_THINK_CLOSE);
    if (close && (!open || close < open)) {
        char *rest = close + strlen(PK_THINK_CLOSE);
        memmove(text, rest, strlen(rest) + 1);
    }
    while ((open = strstr(text, PK_THINK_OPEN)) != NULL) {
        close = strstr(open + strlen(PK_THINK_OPEN), PK_THINK_CLOSE);
        if (!close) {
            *open = '\0';
            *unterminated = 1;
            return;
        }
        char *rest = close + strlen(PK_THINK_CLOSE);
        memmove(open, rest, strlen(rest) + 1);
    }
}

static int is_code_language(const char *info, size_t len) {
    static const char *const langs[] = {"", "cuda", "cpp", "c++", "cu", "c"};
    for (size_t i = 0; i < sizeof langs / sizeof langs[0]; i++) {
        if (strlen(langs[i]) == len && strncasecmp(info, langs[i], len) == 0)
            return 1;
    }
    return 0;
}

typedef struct pk_fence_scan {
    const char *code; /* content of the final code block */
    size_t code_len;
    const char *after;   /* text after its closing fence */
    int n_code_blocks;   /* closed blocks in an accepted language */
    int n_other_blocks;  /* closed blocks in another language (```python, ...) */
    char other_lang[32]; /* the first such language, for the message */
    int unclosed_code;   /* the answer ends inside a code block */
} pk_fence_scan;

/* If line opens or closes a fence, returns the info string's start and length. */
static int fence_line(const char *line, const char *eol, const char **info, size_t *info_len) {
    const char *p = line;
    for (int i = 0; i < 3 && p < eol && *p == ' '; i++)
        p++;
    if (eol - p < 3 || strncmp(p, "```", 3) != 0)
        return 0;
    p += 3;
    while (p < eol && *p == '`')
        p++;
    while (p < eol && isspace((unsigned char)*p))
        p++;
    const char *end = p;
    while (end < eol && !isspace((unsigned char)*end))
        end++;
    *info = p;
    *info_len = (size_t)(end - p);
    return 1;
}

static void scan_fences(const char *text, pk_fence_scan *sc) {
    memset(sc, 0, sizeof *sc);
    int in_block = 0, accepted = 0;
    const char *content = NULL;
    for (const char *line = text; *line;) {
        const char *eol = strchr(line, '\n');
        if (!eol)
            eol = line + strlen(line);
        const char *next = *eol ? eol + 1 : eol;
        const char *info;
        size_t info_len;
        if (fence_line(line, eol, &info, &info_len)) {
            if (!in_block) {
                in_block = 1;
                accepted = is_code_language(info, info_len);
                if (!accepted && sc->other_lang[0] == '\0') {
                    snprintf(sc->other_lang, sizeof sc->other_lang, "%.*s",
                             (int)(info_len > 24 ? 24 : info_len), info);
                }
                content = next;
            } else if (info_len == 0) {
                in_block = 0;
                if (accepted) {
                    sc->n_code_blocks++;
                    sc->code = content;
                    sc->code_len = (size_t)(line - content);
                    sc->after = next;
                } else {
                    sc->n_other_blocks++;
                }
            }
        }
        line = next;
    }
    sc->unclosed_code = in_block && accepted;
}

static int has_word(const char *text, const char *word) {
    size_t n = strlen(word);
    for (const char *p = text; n && (p = strstr(p, word)) != NULL; p += n) {
        int left = p == text || !(isalnum((unsigned char)p[-1]) || p[-1] == '_');
        int right = !(isalnum((unsigned char)p[n]) || p[n] == '_');
        if (left && right)
            return 1;
    }
    return 0;
}

static void explain_format_error(pk_parsed_action *out, const pk_fence_scan *sc, int unterminated) {
    out->format_ok = 0;
    if (sc->unclosed_code) {
        snprintf(out->format_error, sizeof out->format_error,
                 "the last code block is not closed with ``` (the answer may have been cut off)");
    } else if (unterminated) {
        snprintf(out->format_error, sizeof out->format_error,
                 "the answer ended inside <think> (no </think>), so it has no code block");
    } else if (sc->n_other_blocks > 0) {
        snprintf(out->format_error, sizeof out->format_error,
                 "no CUDA code block: found only ```%s; expected ```cuda (or ```cpp, ```c++, "
                 "```cu, ```c, ```) ... ```",
                 sc->other_lang);
    } else {
        snprintf(out->format_error, sizeof out->format_error,
                 "no code block: expected the complete code in ```cuda ... ```");
    }
}

/* The summary, in order of preference: the step's field, the text after the final block, an
 * extractive summary of the code. */
static char *choose_summary(const pk_summarizer *s, const char *field, const char *after,
                            const char *code) {
    size_t cap = (size_t)s->opt.summary_chars;
    char *t = field ? pk_strndup_trim(field, strlen(field)) : NULL;
    if (t && t[0] == '\0') {
        free(t);
        t = NULL;
    }
    if (!t && after) {
        t = pk_strndup_trim(after, strlen(after));
        if (t && t[0] == '\0') {
            free(t);
            t = NULL;
        }
    }
    if (!t)
        return pk_builtin_extractive_summary(code, cap);
    char *capped = pk_text_cap(t, cap);
    free(t);
    return capped;
}

/* Sets code and format_ok; a format problem leaves format_ok 0 with its message. */
static int extract_code(pk_summarizer *s, const pk_fence_scan *sc, int unterminated,
                        pk_parsed_action *out, pk_error *err) {
    if (sc->n_code_blocks == 0 || sc->unclosed_code) {
        explain_format_error(out, sc, unterminated);
        return PK_OK;
    }
    out->code = pk_strndup_trim(sc->code, sc->code_len);
    if (!out->code)
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    if (out->code[0] == '\0') {
        snprintf(out->format_error, sizeof out->format_error, "the final code block is empty");
    } else if (s->entry && !has_word(out->code, s->entry)) {
        snprintf(out->format_error, sizeof out->format_error,
                 "the final code block does not define the entry point `%.64s` that the task "
                 "asks for",
                 s->entry);
    } else {
        out->format_ok = 1;
    }
    return PK_OK;
}

static int parse_answer(pk_summarizer *s, char *answer, const char *summary_field,
                        pk_parsed_action *out, pk_error *err) {
    int unterminated = 0;
    remove_think(answer, &unterminated);
    pk_fence_scan sc;
    scan_fences(answer, &sc);
    int rc = extract_code(s, &sc, unterminated, out, err);
    if (rc != PK_OK)
        return rc;
    /* Format errors get a summary too: the history shows every turn. */
    out->summary = choose_summary(s, summary_field, sc.n_code_blocks ? sc.after : NULL,
                                  out->code ? out->code : "");
    return out->summary ? PK_OK : pk_error_set(err, PK_ERR_NOMEM, "out of memory");
}

int pk_summarizer_parse_action(pk_summarizer *s, const char *action, const char *summary_field,
                               pk_parsed_action *out, pk_error *err) {
    if (!out)
        return pk_error_set(err, PK_ERR_INVALID, "parse_action: out is NULL");
    memset(out, 0, sizeof *out);
    if (!s || !action)
        return pk_error_set(err, PK_ERR_INVALID, "parse_action: summarizer or action is NULL");
    char *answer = strdup(action);
    if (!answer)
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    int rc = parse_answer(s, answer, summary_field, out, err);
    free(answer);
    if (rc == PK_OK && out->format_ok && s->opt.hooks[PK_HOOK_SUMMARIZE].kind != PK_HOOK_BUILTIN)
        rc = pk_summarize_hook(s, action, summary_field, out, err);
    if (rc != PK_OK)
        pk_parsed_action_free(out);
    return rc;
}

void pk_parsed_action_free(pk_parsed_action *a) {
    if (!a)
        return;
    free(a->code);
    free(a->summary);
    a->code = NULL;
    a->summary = NULL;
}
