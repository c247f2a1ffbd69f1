/* The built-in summary when the model wrote none: facts read off the code (its kernels, the
 * NCCL/CUDA calls it makes, its first comment), never its reasoning. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "summarizer_internal.h"

#define PK_MAX_NAMES 8

typedef struct pk_name_list {
    char names[PK_MAX_NAMES][48];
    int n;
} pk_name_list;

static void name_add(pk_name_list *l, const char *name, size_t len) {
    if (len == 0 || len >= sizeof l->names[0] || l->n == PK_MAX_NAMES)
        return;
    for (int i = 0; i < l->n; i++) {
        if (strlen(l->names[i]) == len && strncmp(l->names[i], name, len) == 0)
            return;
    }
    memcpy(l->names[l->n], name, len);
    l->names[l->n][len] = '\0';
    l->n++;
}

static int ident_char(char c) {
    return isalnum((unsigned char)c) || c == '_';
}

/* Identifiers followed by "(": kernels after __global__, and calls to nccl... and cuda... */
static void scan_code(const char *code, pk_name_list *kernels, pk_name_list *calls) {
    int after_global = 0;
    for (const char *p = code; *p;) {
        if (!ident_char(*p) || (p > code && ident_char(p[-1]))) {
            p++;
            continue;
        }
        const char *start = p;
        while (ident_char(*p))
            p++;
        size_t len = (size_t)(p - start);
        const char *q = p;
        while (*q == ' ' || *q == '\t')
            q++;
        if (len == 10 && strncmp(start, "__global__", 10) == 0) {
            after_global = 1;
        } else if (*q == '(' && after_global) {
            name_add(kernels, start, len);
            after_global = 0;
        } else if (*q == '(' &&
                   (strncmp(start, "nccl", 4) == 0 || strncmp(start, "cuda", 4) == 0)) {
            name_add(calls, start, len);
        }
    }
}

static void first_comment(const char *code, char *out, size_t cap) {
    out[0] = '\0';
    const char *c = strstr(code, "//");
    const char *b = strstr(code, "/*");
    const char *start = c && (!b || c < b) ? c : b;
    if (!start)
        return;
    start += 2;
    while (*start == ' ' || *start == '*' || *start == '/')
        start++;
    size_t n = strcspn(start, "\n");
    const char *end_block = strstr(start, "*/");
    if (end_block && (size_t)(end_block - start) < n)
        n = (size_t)(end_block - start);
    while (n > 0 && isspace((unsigned char)start[n - 1]))
        n--;
    snprintf(out, cap, "%.*s", (int)(n > 160 ? 160 : n), start);
}

static void append_list(pk_strbuf *sb, const char *label, const pk_name_list *l) {
    if (l->n == 0)
        return;
    pk_strbuf_printf(sb, "%s%s ", sb->len ? "; " : "", label);
    for (int i = 0; i < l->n; i++)
        pk_strbuf_printf(sb, "%s%s", i ? ", " : "", l->names[i]);
}

char *pk_builtin_extractive_summary(const char *code, size_t max_chars) {
    pk_name_list kernels = {0}, calls = {0};
    scan_code(code, &kernels, &calls);
    char comment[192];
    first_comment(code, comment, sizeof comment);
    pk_strbuf facts = {0};
    append_list(&facts, "kernels", &kernels);
    append_list(&facts, "calls", &calls);
    if (comment[0])
        pk_strbuf_printf(&facts, "%scomment: \"%s\"", facts.len ? "; " : "", comment);
    pk_strbuf sb = {0};
    pk_strbuf_printf(&sb, "(no summary written; from the code: %s)",
                     facts.len ? facts.data : "no kernels or NCCL/CUDA calls found");
    pk_strbuf_free(&facts);
    char *all = pk_strbuf_take(&sb);
    if (!all)
        return NULL;
    char *capped = pk_text_cap(all, max_chars);
    free(all);
    return capped;
}
