/* UTF-8 repair: text that reaches replies, JSON and the store must be valid UTF-8, but
 * compiler logs and a candidate's own output may hold any bytes. */
#include "pk_common.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Length of the valid sequence at p (1..4), or 0 when it is invalid. */
static size_t valid_len(const unsigned char *p) {
    unsigned char c = p[0];
    if (c < 0x80)
        return 1;
    size_t n;
    uint32_t cp;
    if (c >= 0xc2 && c <= 0xdf)
        n = 2, cp = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef)
        n = 3, cp = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4)
        n = 4, cp = c & 0x07;
    else
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80) /* also stops at the terminating NUL */
            return 0;
        cp = (cp << 6) | (p[i] & 0x3f);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

char *pk_utf8_sanitize(const char *s) {
    if (!s)
        return NULL;
    size_t len = strlen(s);
    char *out = malloc(len * 3 + 1); /* each bad byte becomes 3 bytes */
    if (!out)
        return NULL;
    const unsigned char *p = (const unsigned char *)s;
    size_t o = 0;
    while (*p) {
        size_t n = valid_len(p);
        if (n) {
            memcpy(out + o, p, n);
            o += n;
            p += n;
        } else {
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3;
            p++;
        }
    }
    out[o] = '\0';
    return out;
}

char *pk_utf8_sanitize_take(char *s) {
    char *clean = pk_utf8_sanitize(s);
    free(s);
    return clean;
}

void pk_utf8_sanitize_buf(char *buf, size_t cap) {
    if (!buf || cap == 0)
        return;
    buf[cap - 1] = '\0';
    char *clean = pk_utf8_sanitize(buf);
    if (!clean) {
        buf[0] = '\0'; /* out of memory: drop the text rather than keep invalid bytes */
        return;
    }
    size_t n = strlen(clean);
    if (n >= cap) {
        n = cap - 1;
        while (n > 0 && ((unsigned char)clean[n] & 0xc0) == 0x80)
            n--; /* clean[n] starts a character: cut before it */
    }
    memcpy(buf, clean, n);
    buf[n] = '\0';
    free(clean);
}
