/* --since values of `pkgym reward` and `pkgym export`: an absolute time or an age. */
#define _GNU_SOURCE /* timegm */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store_reader.h"

/* 2026-11-22, 2026-11-22T10:30, 2026-11-22T10:30:05, each with an optional Z: UTC. */
static int parse_iso(const char *text, double *out) {
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    int used = 0;
    if (sscanf(text, "%4d-%2d-%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &used) != 3 ||
        used != 10)
        return -1;
    const char *rest = text + used;
    if (*rest == 'T' || *rest == ' ') {
        int n = 0;
        if (sscanf(rest + 1, "%2d:%2d%n", &tm.tm_hour, &tm.tm_min, &n) != 2 || n != 5)
            return -1;
        rest += 1 + n;
        if (*rest == ':') {
            if (sscanf(rest + 1, "%2d%n", &tm.tm_sec, &n) != 1 || n != 2)
                return -1;
            rest += 1 + n;
        }
    }
    if (*rest == 'Z')
        rest++;
    if (*rest || tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 ||
        tm.tm_hour > 23 || tm.tm_min > 59 || tm.tm_sec > 60)
        return -1;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    *out = (double)timegm(&tm);
    return 0;
}

int pk_store_parse_since(const char *text, double now, double *out, pk_error *err) {
    if (!text || !*text)
        return pk_error_set(err, PK_ERR_INVALID, "--since: empty value");
    if (parse_iso(text, out) == 0)
        return PK_OK;
    char *end = NULL;
    double v = strtod(text, &end);
    if (end != text && v >= 0) {
        double unit = 0;
        if (!*end)
            unit = -1; /* seconds since the epoch */
        else if (!strcmp(end, "s"))
            unit = 1;
        else if (!strcmp(end, "m"))
            unit = 60;
        else if (!strcmp(end, "h"))
            unit = 3600;
        else if (!strcmp(end, "d"))
            unit = 86400;
        if (unit < 0) {
            *out = v;
            return PK_OK;
        }
        if (unit > 0) {
            *out = now - v * unit;
            return PK_OK;
        }
    }
    return pk_error_set(err, PK_ERR_INVALID,
                        "--since '%s': want seconds since the epoch, a UTC date or time "
                        "(2026-11-22, 2026-11-22T10:30[:05][Z]) or an age (90s, 30m, 6h, 2d)",
                        text);
}
