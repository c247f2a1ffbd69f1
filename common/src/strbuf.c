#include "pk_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int reserve(pk_strbuf *sb, size_t extra) {
    if (sb->len + extra + 1 <= sb->cap)
        return PK_OK;
    size_t cap = sb->cap ? sb->cap : 64;
    while (cap < sb->len + extra + 1)
        cap *= 2;
    char *p = realloc(sb->data, cap);
    if (!p)
        return PK_ERR_NOMEM;
    sb->data = p;
    sb->cap = cap;
    return PK_OK;
}

int pk_strbuf_append(pk_strbuf *sb, const char *s, size_t n) {
    if (reserve(sb, n))
        return PK_ERR_NOMEM;
    if (n)
        memcpy(sb->data + sb->len, s, n);
    sb->len += n;
    sb->data[sb->len] = '\0';
    return PK_OK;
}

int pk_strbuf_puts(pk_strbuf *sb, const char *s) {
    return pk_strbuf_append(sb, s, strlen(s));
}

int pk_strbuf_vprintf(pk_strbuf *sb, const char *fmt, va_list ap) {
    va_list copy;
    va_copy(copy, ap);
    int n = vsnprintf(NULL, 0, fmt, copy);
    va_end(copy);
    if (n < 0)
        return PK_ERR_INVALID;
    if (reserve(sb, (size_t)n))
        return PK_ERR_NOMEM;
    vsnprintf(sb->data + sb->len, (size_t)n + 1, fmt, ap);
    sb->len += (size_t)n;
    return PK_OK;
}

int pk_strbuf_printf(pk_strbuf *sb, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = pk_strbuf_vprintf(sb, fmt, ap);
    va_end(ap);
    return rc;
}

char *pk_strbuf_take(pk_strbuf *sb) {
    char *s = sb->data ? sb->data : calloc(1, 1);
    sb->data = NULL;
    sb->len = sb->cap = 0;
    return s;
}

void pk_strbuf_free(pk_strbuf *sb) {
    free(sb->data);
    sb->data = NULL;
    sb->len = sb->cap = 0;
}
