#include "pk_cli_args.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

int pk_arg_long(const char *cmd, const char *opt, const char *v, long lo, long hi, long *out) {
    char *end = NULL;
    errno = 0;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || errno || end == v || *end || x < lo || x > hi) {
        fprintf(stderr, "pkgym %s: %s wants an integer in [%ld, %ld], got '%s'\n", cmd, opt, lo, hi,
                v ? v : "");
        return -1;
    }
    *out = x;
    return 0;
}

int pk_arg_positive(const char *cmd, const char *opt, const char *v, const char *what,
                    double *out) {
    char *end = NULL;
    errno = 0;
    double x = v ? strtod(v, &end) : 0;
    if (!v || errno || end == v || *end || !(x > 0) || x > 1e12) {
        fprintf(stderr, "pkgym %s: %s wants a positive %s, got '%s'\n", cmd, opt, what, v ? v : "");
        return -1;
    }
    *out = x;
    return 0;
}
