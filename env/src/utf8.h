/* Text that reaches replies and the store must be valid UTF-8 (msgpack str, JSON), but
 * compiler logs and a candidate's own output may hold any bytes. */
#ifndef PK_ENV_UTF8_H
#define PK_ENV_UTF8_H

#include <stddef.h>

/* A malloc'd copy of s with every invalid UTF-8 sequence replaced by U+FFFD; NULL when s is
 * NULL or memory runs out. */
char *pk_utf8_sanitize(const char *s);
/* Like pk_utf8_sanitize, but takes s (freeing it) and returns the clean text. */
char *pk_utf8_sanitize_take(char *s);

/* Repairs the NUL-terminated text in buf (cap bytes) in place, truncating at a character
 * boundary when the repaired text does not fit. */
void pk_utf8_sanitize_buf(char *buf, size_t cap);

#endif
