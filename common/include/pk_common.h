/* pk_common: small utilities every module shares (errors, strings, clocks, files, hashing). */
#ifndef PK_COMMON_H
#define PK_COMMON_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "pk_status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Error codes. Every fallible pk_ function returns one of these and, when given
 * a pk_error, fills a human-readable message. Nothing in pkgym aborts. */
typedef enum pk_errc {
    PK_OK = 0,
    PK_ERR_INVALID = 1, /* bad argument or bad input */
    PK_ERR_NOMEM = 2,
    PK_ERR_IO = 3, /* file or socket I/O */
    PK_ERR_NOT_FOUND = 4,
    PK_ERR_TIMEOUT = 5,
    PK_ERR_UNSUPPORTED = 6, /* feature not built or not available on this host */
    PK_ERR_BUSY = 7,
    PK_ERR_OVERLOADED = 8,
    PK_ERR_SYSTEM = 9, /* a system call failed */
    PK_ERR_INTERNAL = 10,
    PK_ERR_INFRA = 11, /* an evaluation failed twice before the candidate's code was loaded */
} pk_errc;

typedef struct pk_error {
    int code;
    char message[512];
} pk_error;

/* Sets err (if non-NULL) and returns code, so callers can `return pk_error_set(...)`. */
int pk_error_set(pk_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Like pk_error_set, with ": strerror(errno)" appended. */
int pk_error_errno(pk_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void pk_error_clear(pk_error *err);
const char *pk_errc_name(int code);

/* Growable NUL-terminated string. A zeroed pk_strbuf is a valid empty buffer. */
typedef struct pk_strbuf {
    char *data;
    size_t len;
    size_t cap;
} pk_strbuf;

int pk_strbuf_append(pk_strbuf *sb, const char *s, size_t n);
int pk_strbuf_puts(pk_strbuf *sb, const char *s);
int pk_strbuf_printf(pk_strbuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int pk_strbuf_vprintf(pk_strbuf *sb, const char *fmt, va_list ap);
/* Returns the owned string (never NULL) and resets sb. */
char *pk_strbuf_take(pk_strbuf *sb);
void pk_strbuf_free(pk_strbuf *sb);

/* Clocks. */
double pk_now_ms(void);      /* monotonic, milliseconds */
double pk_now_us(void);      /* monotonic, microseconds */
double pk_wall_time_s(void); /* seconds since the epoch */
uint64_t pk_now_ns(void);    /* monotonic, nanoseconds */

/* A double shared between threads without a lock (e.g. a deadline that another thread may
 * move): atomic loads and stores through the compiler's generic atomics. */
static inline double pk_deadline_load(const double *p) {
    double v;
    __atomic_load(p, &v, __ATOMIC_ACQUIRE);
    return v;
}
static inline void pk_deadline_store(double *p, double v) {
    __atomic_store(p, &v, __ATOMIC_RELEASE);
}

/* Files. */
int pk_read_file(const char *path, char **out, size_t *out_len, pk_error *err);
/* Reads a file that untrusted code could have written or replaced (a job's work dir): never
 * through a symlink, only a regular file (no FIFO to block on), at most max_bytes (0: any). */
int pk_read_file_untrusted(const char *path, size_t max_bytes, char **out, size_t *out_len,
                           pk_error *err);
int pk_write_file(const char *path, const void *data, size_t len, pk_error *err);
int pk_mkdir_p(const char *path, pk_error *err);
/* Created 0600 (an existing file is made 0600); a symlink at path is refused (O_NOFOLLOW). */
int pk_write_file_private(const char *path, const void *data, size_t len, pk_error *err);
/* mkdir -p whose last component is private: created 0700, or made 0700 when it exists with
 * wider permissions (*tightened = 1; NULL allowed). An existing directory owned by another
 * user is refused: its owner could swap what we put there. */
int pk_mkdir_private(const char *path, int *tightened, pk_error *err);
int pk_rm_rf(const char *path);
int pk_path_exists(const char *path);
char *pk_path_join(const char *a, const char *b); /* malloc'd */

/* UTF-8 repair. A malloc'd copy of s with every invalid sequence replaced by U+FFFD (NULL when
 * s is NULL or memory runs out); the _take form frees s; the _buf form repairs in place,
 * truncating at a character boundary when the repaired text does not fit in cap bytes. */
char *pk_utf8_sanitize(const char *s);
char *pk_utf8_sanitize_take(char *s);
void pk_utf8_sanitize_buf(char *buf, size_t cap);

/* SHA-256. */
typedef struct pk_sha256 {
    uint32_t state[8];
    uint64_t bits;
    uint8_t buf[64];
    size_t used;
} pk_sha256;
void pk_sha256_init(pk_sha256 *h);
void pk_sha256_update(pk_sha256 *h, const void *data, size_t len);
void pk_sha256_final(pk_sha256 *h, uint8_t out[32]);
/* Hex digest (65 bytes incl. NUL) of one buffer. */
void pk_sha256_hex(const void *data, size_t len, char out[65]);

#ifdef __cplusplus
}
#endif
#endif
