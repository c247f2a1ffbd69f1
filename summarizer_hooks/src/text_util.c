/* Small text helpers: trimming, capping at a UTF-8 boundary, stripping sandbox paths. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "summarizer_internal.h"

char *pk_strndup_trim(const char *s, size_t n) {
    while (n > 0 && isspace((unsigned char)*s)) {
        s++;
        n--;
    }
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        n--;
    char *t = malloc(n + 1);
    if (t) {
        memcpy(t, s, n);
        t[n] = '\0';
    }
    return t;
}

char *pk_text_cap(const char *text, size_t max_chars) {
    size_t len = strlen(text);
    if (len <= max_chars)
        return strdup(text);
    static const char ellipsis[] = "...";
    size_t keep = max_chars > 3 ? max_chars - 3 : 0;
    /* Never cut inside a UTF-8 sequence: back up over continuation bytes. */
    while (keep > 0 && ((unsigned char)text[keep] & 0xC0) == 0x80)
        keep--;
    pk_strbuf sb = {0};
    if (pk_strbuf_append(&sb, text, keep) != PK_OK ||
        pk_strbuf_append(&sb, ellipsis, max_chars > 3 ? 3 : max_chars) != PK_OK) {
        pk_strbuf_free(&sb);
        return NULL;
    }
    return pk_strbuf_take(&sb);
}

static int is_path_char(char c) {
    return isalnum((unsigned char)c) || c == '/' || c == '_' || c == '-' || c == '.' || c == '+';
}

/* An absolute path with at least two components (/a/b) at a token start becomes its file name:
 * sandbox job directories and toolkit locations tell the model nothing. */
char *pk_strip_sandbox_paths(const char *text) {
    pk_strbuf sb = {0};
    const char *p = text;
    while (*p) {
        int token_start = p == text || !(is_path_char(p[-1]) || p[-1] == '\\');
        if (*p == '/' && token_start) {
            const char *end = p;
            int slashes = 0;
            const char *last_slash = p;
            while (is_path_char(*end)) {
                if (*end == '/') {
                    slashes++;
                    last_slash = end;
                }
                end++;
            }
            if (slashes >= 2 && end > last_slash + 1) {
                if (pk_strbuf_append(&sb, last_slash + 1, (size_t)(end - last_slash - 1)) !=
                    PK_OK) {
                    pk_strbuf_free(&sb);
                    return NULL;
                }
                p = end;
                continue;
            }
        }
        if (pk_strbuf_append(&sb, p, 1) != PK_OK) {
            pk_strbuf_free(&sb);
            return NULL;
        }
        p++;
    }
    return pk_strbuf_take(&sb);
}

size_t pk_approx_tokens(const char *text) {
    /* Subword tokenizers spend about one token per 4 letters or digits of a word and one per
     * punctuation mark; whitespace mostly merges into the next token. */
    size_t tokens = 0, run = 0;
    for (const unsigned char *p = (const unsigned char *)text;; p++) {
        if (*p && (isalnum(*p) || *p == '_' || *p >= 0x80)) {
            run++;
            continue;
        }
        tokens += (run + 3) / 4;
        run = 0;
        if (!*p)
            break;
        if (!isspace(*p))
            tokens++;
        else if (*p == '\n')
            tokens++;
    }
    return tokens;
}
