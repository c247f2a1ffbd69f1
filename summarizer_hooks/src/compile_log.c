/* Condensing compiler output (nvcc/EDG, host gcc, ptxas, nvlink) into a short, useful message:
 * the first errors with their source lines; repeats of one message and further errors on an
 * already reported line folded; warnings dropped when there are errors; within a budget. */
#define _GNU_SOURCE /* memmem */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "summarizer_internal.h"

typedef enum pk_severity { PK_SEV_ERROR, PK_SEV_WARNING, PK_SEV_NOTE } pk_severity;

typedef struct pk_diag {
    pk_severity sev;
    char key[192];    /* file:line, for cascades */
    char line_no[16]; /* for the fold note */
    const char *msg;  /* message text, up to the end of the header line */
    size_t msg_len;
    pk_strbuf text;    /* header and source context */
    pk_strbuf repeats; /* line numbers of folded repeats */
    int n_repeats;
    int shown;
} pk_diag;

typedef struct pk_diag_list {
    pk_diag *items;
    int n, cap;
    int n_errors, n_warnings, n_duplicates, n_cascades;
} pk_diag_list;

static const char *const pk_sev_words[] = {
    "catastrophic error", "fatal error", "error", "warning", "note", "remark"};

static pk_severity sev_of(const char *word) {
    if (strstr(word, "error"))
        return PK_SEV_ERROR;
    return strcmp(word, "warning") == 0 ? PK_SEV_WARNING : PK_SEV_NOTE;
}

/* Extracts the line number from "file(12)" or "file:12:5" into d->line_no and d->key. */
static void diag_location(pk_diag *d, const char *loc, size_t len) {
    const char *paren = memchr(loc, '(', len);
    const char *num = NULL;
    size_t file_len = len;
    if (paren && loc[len - 1] == ')') {
        num = paren + 1;
        file_len = (size_t)(paren - loc);
    } else {
        const char *colon = memchr(loc, ':', len);
        if (colon) {
            num = colon + 1;
            file_len = (size_t)(colon - loc);
        }
    }
    size_t n = 0;
    while (num && isdigit((unsigned char)num[n]) && n + 1 < sizeof d->line_no)
        n++;
    snprintf(d->line_no, sizeof d->line_no, "%.*s", (int)n, num ? num : "");
    snprintf(d->key, sizeof d->key, "%.*s:%s", (int)(file_len > 160 ? 160 : file_len), loc,
             d->line_no);
}

/* Recognises "<loc>: <severity>[ #N-D]: <msg>" and "ptxas/nvlink error : <msg>". */
static int diag_header(const char *line, size_t len, pk_diag *d) {
    if (strncmp(line, "ptxas", 5) == 0 || strncmp(line, "nvlink", 6) == 0) {
        /* "ptxas error   : msg", "ptxas fatal   : msg", "nvlink warning : msg" */
        const char *colon = memchr(line, ':', len);
        if (!colon)
            return 0;
        size_t head = (size_t)(colon - line);
        if (memmem(line, head, "error", 5) || memmem(line, head, "fatal", 5))
            d->sev = PK_SEV_ERROR;
        else if (memmem(line, head, "warning", 7))
            d->sev = PK_SEV_WARNING;
        else
            return 0;
        snprintf(d->key, sizeof d->key, "%.*s", (int)head, line);
        d->msg = colon + 1;
        d->msg_len = len - head - 1;
        return 1;
    }
    for (size_t i = 1; i + 2 < len; i++) {
        if (line[i] != ':' || line[i + 1] != ' ')
            continue;
        const char *rest = line + i + 2;
        for (size_t w = 0; w < sizeof pk_sev_words / sizeof pk_sev_words[0]; w++) {
            size_t wl = strlen(pk_sev_words[w]);
            if (strncmp(rest, pk_sev_words[w], wl) != 0 || (rest[wl] != ':' && rest[wl] != ' '))
                continue;
            const char *m = strchr(rest + wl, ':');
            if (!m || m >= line + len)
                continue;
            d->sev = sev_of(pk_sev_words[w]);
            diag_location(d, line, i);
            d->msg = m + 1;
            d->msg_len = len - (size_t)(m + 1 - line);
            return 1;
        }
    }
    return 0;
}

/* Lines that only restate what the condensed form already says. */
static int noise_line(const char *line, size_t len) {
    static const char *const noise[] = {"errors detected in the compilation",
                                        "error detected in the compilation",
                                        "Remark: The warnings can be suppressed",
                                        "compilation terminated.",
                                        "In file included from",
                                        "                 from ",
                                        "ptxas info",
                                        "nvlink info"};
    for (size_t i = 0; i < sizeof noise / sizeof noise[0]; i++) {
        size_t n = strlen(noise[i]);
        for (size_t j = 0; j + n <= len; j++) {
            if (strncmp(line + j, noise[i], n) == 0)
                return 1;
        }
    }
    return 0;
}

static pk_diag *diag_push(pk_diag_list *l, const pk_diag *d) {
    if (l->n == l->cap) {
        int cap = l->cap ? l->cap * 2 : 16;
        pk_diag *items = realloc(l->items, (size_t)cap * sizeof *items);
        if (!items)
            return NULL;
        l->items = items;
        l->cap = cap;
    }
    l->items[l->n] = *d;
    return &l->items[l->n++];
}

static void diag_list_free(pk_diag_list *l) {
    for (int i = 0; i < l->n; i++) {
        pk_strbuf_free(&l->items[i].text);
        pk_strbuf_free(&l->items[i].repeats);
    }
    free(l->items);
}

/* An earlier diagnostic this one repeats (same message) or cascades from (same line). */
static pk_diag *diag_folds_into(pk_diag_list *l, const pk_diag *d, int *is_duplicate) {
    for (int i = 0; i < l->n; i++) {
        pk_diag *e = &l->items[i];
        if (e->sev != d->sev)
            continue;
        if (e->msg_len == d->msg_len && strncmp(e->msg, d->msg, d->msg_len) == 0) {
            *is_duplicate = 1;
            return e;
        }
        if (d->sev == PK_SEV_ERROR && d->line_no[0] && strcmp(e->key, d->key) == 0) {
            *is_duplicate = 0;
            return e;
        }
    }
    return NULL;
}

static int diag_fold(pk_diag_list *l, pk_diag *into, const pk_diag *d, int is_duplicate) {
    if (is_duplicate) {
        l->n_duplicates++;
        into->n_repeats++;
        if (into->n_repeats <= 6 && d->line_no[0]) {
            return pk_strbuf_printf(&into->repeats, "%s%s", into->repeats.len ? ", " : "",
                                    d->line_no);
        }
        return PK_OK;
    }
    l->n_cascades++;
    return PK_OK;
}

static int collect(const char *log, pk_diag_list *l) {
    pk_diag *cur = NULL; /* receives the context lines that follow its header */
    for (const char *line = log; *line;) {
        size_t len = strcspn(line, "\n");
        const char *next = line[len] ? line + len + 1 : line + len;
        pk_diag d = {0};
        int blank = strspn(line, " \t\r") >= len;
        if (noise_line(line, len)) {
            cur = NULL;
        } else if (diag_header(line, len, &d)) {
            l->n_errors += d.sev == PK_SEV_ERROR;
            l->n_warnings += d.sev == PK_SEV_WARNING;
            int dup = 0;
            pk_diag *into = d.sev == PK_SEV_NOTE ? NULL : diag_folds_into(l, &d, &dup);
            if (d.sev == PK_SEV_NOTE && cur) {
                /* A note belongs to the diagnostic before it. */
                if (pk_strbuf_append(&cur->text, line, len) || pk_strbuf_puts(&cur->text, "\n"))
                    return PK_ERR_NOMEM;
            } else if (into) {
                if (diag_fold(l, into, &d, dup) != PK_OK)
                    return PK_ERR_NOMEM;
                cur = NULL;
            } else if (d.sev != PK_SEV_NOTE) {
                cur = diag_push(l, &d);
                if (!cur || pk_strbuf_append(&cur->text, line, len) ||
                    pk_strbuf_puts(&cur->text, "\n")) {
                    return PK_ERR_NOMEM;
                }
            }
        } else if (blank) {
            cur = NULL;
        } else if (cur && cur->text.len < 600) {
            if (pk_strbuf_append(&cur->text, line, len) || pk_strbuf_puts(&cur->text, "\n"))
                return PK_ERR_NOMEM;
        }
        line = next;
    }
    return PK_OK;
}

static int render_diag(pk_strbuf *out, const pk_diag *d) {
    int rc = pk_strbuf_append(out, d->text.data, d->text.len);
    if (rc == PK_OK && d->n_repeats > 0) {
        rc = pk_strbuf_printf(out, "(the same %s %d more time%s%s%s%s)\n",
                              d->sev == PK_SEV_ERROR ? "error" : "warning", d->n_repeats,
                              d->n_repeats > 1 ? "s" : "", d->repeats.len ? ", at line " : "",
                              d->repeats.len ? d->repeats.data : "",
                              d->n_repeats > 6 && d->repeats.len ? ", ..." : "");
    }
    return rc;
}

static char *render(pk_diag_list *l, size_t max_chars) {
    int want_errors = l->n_errors > 0;
    pk_strbuf out = {0};
    int shown = 0, omitted = 0;
    const size_t footer_reserve = 120;
    size_t room = max_chars > footer_reserve ? max_chars - footer_reserve : max_chars / 2;
    for (int i = 0; i < l->n; i++) {
        pk_diag *d = &l->items[i];
        if (want_errors && d->sev != PK_SEV_ERROR)
            continue;
        pk_strbuf one = {0};
        if (render_diag(&one, d) != PK_OK) {
            pk_strbuf_free(&one);
            pk_strbuf_free(&out);
            return NULL;
        }
        if (out.len + one.len <= room || shown == 0) {
            /* The first diagnostic is always shown, cut to the budget if need be. */
            char *cut = pk_text_cap(one.data, room > out.len ? room - out.len : 0);
            if (!cut || pk_strbuf_puts(&out, cut) != PK_OK) {
                free(cut);
                pk_strbuf_free(&one);
                pk_strbuf_free(&out);
                return NULL;
            }
            free(cut);
            shown++;
        } else {
            omitted++;
        }
        pk_strbuf_free(&one);
    }
    int total = want_errors ? l->n_errors : l->n_warnings;
    if (omitted || l->n_duplicates || l->n_cascades || (want_errors && l->n_warnings)) {
        if (out.len > 0 && out.data[out.len - 1] != '\n')
            pk_strbuf_puts(&out, "\n");
        pk_strbuf_printf(&out, "[%d %s%s: %d shown", total, want_errors ? "error" : "warning",
                         total == 1 ? "" : "s", shown);
        if (l->n_duplicates) {
            pk_strbuf_printf(&out, ", %d repeat%s folded", l->n_duplicates,
                             l->n_duplicates == 1 ? "" : "s");
        }
        if (l->n_cascades) {
            pk_strbuf_printf(&out, ", %d follow-on error%s on reported lines folded", l->n_cascades,
                             l->n_cascades == 1 ? "" : "s");
        }
        if (omitted)
            pk_strbuf_printf(&out, ", %d more not shown", omitted);
        if (want_errors && l->n_warnings) {
            pk_strbuf_printf(&out, ", %d warning%s omitted", l->n_warnings,
                             l->n_warnings == 1 ? "" : "s");
        }
        pk_strbuf_puts(&out, "]");
    }
    char *text = pk_strndup_trim(out.data ? out.data : "", out.len);
    pk_strbuf_free(&out);
    return text;
}

/* No recognisable diagnostics: the first non-blank, non-noise lines. */
static char *render_raw(const char *log) {
    pk_strbuf out = {0};
    for (const char *line = log; *line;) {
        size_t len = strcspn(line, "\n");
        if (strspn(line, " \t\r") < len && !noise_line(line, len)) {
            pk_strbuf_append(&out, line, len);
            pk_strbuf_puts(&out, "\n");
        }
        line += len + (line[len] != '\0');
    }
    char *text = pk_strndup_trim(out.data ? out.data : "", out.len);
    pk_strbuf_free(&out);
    return text;
}

char *pk_condense_compile_log(const char *log, size_t max_chars) {
    char *clean = pk_strip_sandbox_paths(log ? log : "");
    if (!clean)
        return NULL;
    pk_diag_list l = {0};
    char *text = NULL;
    if (collect(clean, &l) == PK_OK)
        text = l.n > 0 ? render(&l, max_chars) : render_raw(clean);
    diag_list_free(&l);
    free(clean);
    if (!text)
        return NULL;
    /* The footer can push past a tiny budget; the budget always wins. */
    char *capped = pk_text_cap(text, max_chars);
    free(text);
    return capped;
}
