/* The examples block of a prompt. Its header says where the kernels come from and which scope
 * chose them, so that a reader of the prompt (or of the stored trajectory) knows whether the
 * episode's own problem could have been among them. */
#include <stdio.h>

#include "pk_archive.h"

static void entry_text(pk_strbuf *sb, const pk_archive_entry *e, int i) {
    pk_strbuf_printf(sb, "### Example %d: %s (archive entry %lld, world size %d", i + 1,
                     e->problem_id, e->id, e->world_size);
    if (e->speedup > 0)
        pk_strbuf_printf(sb, ", speedup %.2fx", e->speedup);
    if (e->hardware && e->hardware[0])
        pk_strbuf_printf(sb, ", on %s", e->hardware);
    pk_strbuf_puts(sb, ")\n\n");
    if (e->dims_json)
        pk_strbuf_printf(sb, "Dims: %s\n\n", e->dims_json);
    if (e->plan && e->plan[0])
        pk_strbuf_printf(sb, "Plan: %s\n\n", e->plan);
    pk_strbuf_printf(sb, "```cuda\n%s\n```\n\n", e->code);
}

char *pk_archive_examples_text(const pk_archive_entry *e, int n, pk_examples_scope scope) {
    pk_strbuf sb = {0};
    pk_strbuf_printf(&sb,
                     "## Verified kernels from the archive (%d example%s)\n\n"
                     "Each kernel below passed verification on %s. %s\n\n",
                     n, n == 1 ? "" : "s",
                     scope == PK_EXAMPLES_ANY ? "a problem of this suite"
                                              : "another problem of this suite",
                     scope == PK_EXAMPLES_ANY
                         ? "Scope any: this problem's own verified kernels may be among them."
                         : "Scope other_problems: this problem's own solutions are left out; use "
                           "the examples for their techniques, not as an answer.");
    for (int i = 0; i < n; i++)
        entry_text(&sb, &e[i], i);
    pk_strbuf_puts(&sb, "## Your task\n\n");
    return pk_strbuf_take(&sb);
}
