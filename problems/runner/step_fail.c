/* rn_fail: marks a rank's step failed with its message (pk_runner.h). Its own file, so that
 * tests of the runner's pieces link it without the rest of rank.c. */
#include "pk_runner.h"

#include <stdarg.h>
#include <stdio.h>

int rn_fail(rank_step *st, const char *fmt, ...) {
    st->failed = 1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(st->msg, sizeof st->msg, fmt, ap);
    va_end(ap);
    return -1;
}
