#include "pk_common.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static const char *const errc_names[] = {
    "ok",          "invalid", "nomem",      "io",     "not_found", "timeout",
    "unsupported", "busy",    "overloaded", "system", "internal",  "infra",
};

const char *pk_errc_name(int code) {
    if (code >= 0 && code < (int)(sizeof errc_names / sizeof *errc_names))
        return errc_names[code];
    return "unknown";
}

int pk_error_set(pk_error *err, int code, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        err->code = code;
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
    }
    return code;
}

int pk_error_errno(pk_error *err, int code, const char *fmt, ...) {
    int saved = errno;
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        err->code = code;
        int n = vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
        if (n >= 0 && (size_t)n < sizeof err->message)
            snprintf(err->message + n, sizeof err->message - (size_t)n, ": %s", strerror(saved));
    }
    return code;
}

void pk_error_clear(pk_error *err) {
    if (err) {
        err->code = PK_OK;
        err->message[0] = '\0';
    }
}
