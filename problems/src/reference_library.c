/* The reference library headers (problems/include/pk_*.cuh) a problem.cu includes, named under
 * the reference shown in the prompt with what they do (their "// Prompt:" paragraph): the
 * listing alone would hide that the baseline calls code the model is not shown (as PKB's
 * references call PyTorch's kernels). Not inlined: a header is up to ~850 lines, and prompts
 * must stay within trainers' prompt lengths. */
#include "pk_problem_extras.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_HEADERS = 16 };

typedef struct found {
    int n;
    char names[MAX_HEADERS][64];
} found;

/* The header's description for models: its "// Prompt: ..." paragraph, joined into one line
 * (the leading comments are written for developers). Empty when it has none. */
static void describe(const char *text, char *out, size_t cap) {
    size_t n = 0;
    out[0] = 0;
    const char *c = strstr(text, "// Prompt: ");
    if (!c)
        return;
    c += strlen("// Prompt: ");
    for (;;) {
        const char *end = strchr(c, '\n');
        size_t len = end ? (size_t)(end - c) : strlen(c);
        if (n && n + 1 < cap)
            out[n++] = ' ';
        if (len > cap - 1 - n)
            len = cap - 1 - n;
        memcpy(out + n, c, len);
        n += len;
        out[n] = 0;
        /* The paragraph ends at a bare "//" or at code. */
        if (!end || strncmp(end + 1, "// ", 3) != 0)
            break;
        for (c = end + 4; *c == ' ';)
            c++;
    }
}

static int seen(const found *f, const char *name) {
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->names[i], name) == 0)
            return 1;
    return 0;
}

/* Appends a line per library header `src` includes, then those they include, once each. */
static int walk(const char *include_dir, const char *src, found *f, pk_strbuf *sb, int depth,
                pk_error *err) {
    for (const char *s = strstr(src, "#include \"pk_"); s; s = strstr(s + 1, "#include \"pk_")) {
        const char *name = s + strlen("#include \"");
        size_t n = strcspn(name, "\"\n");
        char hname[64];
        if (n < 5 || n >= sizeof hname || strncmp(name + n - 4, ".cuh", 4) != 0)
            continue; /* the module ABI (pk_problem_module.h) and other .h are not the library */
        memcpy(hname, name, n);
        hname[n] = 0;
        if (seen(f, hname) || f->n == MAX_HEADERS)
            continue;
        snprintf(f->names[f->n++], sizeof f->names[0], "%s", hname);
        char *path = pk_path_join(include_dir, hname), *text = NULL;
        if (!path)
            return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
        /* Unreadable where only the problem's own directory is visible (the runner's sandbox,
         * which needs no prompt): named without details, never a load error. */
        pk_error ignored;
        if (pk_read_file(path, &text, NULL, &ignored)) {
            free(path);
            pk_strbuf_printf(sb, "- `%s`\n", hname);
            continue;
        }
        free(path);
        int lines = 0;
        for (const char *c = text; *c; c++)
            lines += *c == '\n';
        char what[320];
        describe(text, what, sizeof what);
        pk_strbuf_printf(sb, "- `%s` (%d lines)%s%s\n", hname, lines, what[0] ? ": " : "", what);
        int rc = depth < 4 ? walk(include_dir, text, f, sb, depth + 1, err) : PK_OK;
        free(text);
        if (rc)
            return rc;
    }
    return PK_OK;
}

int pk_reference_library_note(const char *problem_dir, const char *src, char **note,
                              pk_error *err) {
    *note = NULL;
    /* problems/<suite>/<id>/ -> problems/include/ */
    char *suite_dir = pk_path_join(problem_dir, "../../include");
    if (!suite_dir)
        return pk_error_set(err, PK_ERR_NOMEM, "out of memory");
    pk_strbuf list = {0};
    found f = {0};
    int rc = walk(suite_dir, src, &f, &list, 0, err);
    free(suite_dir);
    if (rc || !list.len) {
        pk_strbuf_free(&list);
        return rc;
    }
    pk_strbuf sb = {0};
    pk_strbuf_printf(&sb,
                     "\nThe reference also runs pkgym's reference library, not shown here and "
                     "not available to your code (a submission includes only what the rules "
                     "above allow):\n\n%s",
                     list.data);
    pk_strbuf_free(&list);
    *note = pk_strbuf_take(&sb);
    return PK_OK;
}
