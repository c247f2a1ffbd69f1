/* The verdict: status names, its JSON form, and freeing it. */
#include "sb_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const sb_status_names[] = {
    "ok", "exit", "signal", "timeout", "memory", "output_limit", "setup_error",
};

const char *pk_sb_status_name(pk_sb_status s) {
    return (s >= PK_SB_OK && s <= PK_SB_SETUP_ERROR) ? sb_status_names[s] : "unknown";
}

/* Length of the valid UTF-8 sequence at s (at most n bytes), 0 if invalid. */
static size_t utf8_len(const unsigned char *s, size_t n) {
    size_t len = s[0] < 0xC2 ? 0 : s[0] < 0xE0 ? 2 : s[0] < 0xF0 ? 3 : s[0] < 0xF5 ? 4 : 0;
    if (len == 0 || len > n)
        return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    if ((s[0] == 0xE0 && s[1] < 0xA0) || (s[0] == 0xF0 && s[1] < 0x90) ||
        (s[0] == 0xF4 && s[1] > 0x8F) || (s[0] == 0xED && s[1] > 0x9F))
        return 0; /* overlong, beyond U+10FFFF, or a surrogate */
    return len;
}

int sb_json_escape(pk_strbuf *sb, const char *str, size_t n) {
    const unsigned char *s = (const unsigned char *)str;
    int rc = pk_strbuf_append(sb, "\"", 1);
    for (size_t i = 0; i < n && !rc;) {
        unsigned char c = s[i];
        if (c == '"' || c == '\\') {
            char e[2] = {'\\', (char)c};
            rc = pk_strbuf_append(sb, e, 2);
            i++;
        } else if (c == '\n') {
            rc = pk_strbuf_append(sb, "\\n", 2);
            i++;
        } else if (c == '\t') {
            rc = pk_strbuf_append(sb, "\\t", 2);
            i++;
        } else if (c < 0x20 || c == 0x7F) {
            rc = pk_strbuf_printf(sb, "\\u%04x", c);
            i++;
        } else if (c < 0x80) {
            rc = pk_strbuf_append(sb, (const char *)s + i, 1);
            i++;
        } else {
            size_t len = utf8_len(s + i, n - i);
            rc = len ? pk_strbuf_append(sb, (const char *)s + i, len)
                     : pk_strbuf_append(sb, "\\ufffd", 6);
            i += len ? len : 1;
        }
    }
    return rc ? rc : pk_strbuf_append(sb, "\"", 1);
}

char *pk_sandbox_result_to_json(const pk_sandbox_result *r) {
    pk_strbuf sb = {0};
    int rc = pk_strbuf_printf(&sb,
                              "{\"status\":\"%s\",\"exit_code\":%d,\"signal\":%d,\"wall_ms\":%.3f,"
                              "\"cpu_ms\":%.3f,\"max_rss_kb\":%ld,\"stdout\":",
                              pk_sb_status_name(r->status), r->exit_code, r->signal, r->wall_ms,
                              r->cpu_ms, r->max_rss_kb);
    rc = rc ? rc : sb_json_escape(&sb, r->out ? r->out : "", r->out ? r->out_len : 0);
    rc = rc ? rc : pk_strbuf_puts(&sb, ",\"stderr\":");
    rc = rc ? rc : sb_json_escape(&sb, r->err ? r->err : "", r->err ? r->err_len : 0);
    rc = rc ? rc
            : pk_strbuf_printf(&sb,
                               ",\"truncated\":%s,\"detail\":", r->truncated ? "true" : "false");
    rc = rc ? rc : sb_json_escape(&sb, r->detail, strnlen(r->detail, sizeof r->detail));
    rc = rc ? rc : pk_strbuf_puts(&sb, ",\"limits\":");
    rc = rc ? rc : sb_json_escape(&sb, r->limits, strnlen(r->limits, sizeof r->limits));
    rc = rc ? rc : pk_strbuf_puts(&sb, "}");
    if (rc) {
        pk_strbuf_free(&sb);
        return NULL;
    }
    return pk_strbuf_take(&sb);
}

void pk_sandbox_result_free(pk_sandbox_result *r) {
    if (!r)
        return;
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
    r->out_len = r->err_len = 0;
}
