// Hostile: tries to read an expected answer from a file (fopen is outside the allowlist).
#include <stdio.h>
#include <string.h>

#include "pk_ctx.h"

extern "C" int solution(const pk_ctx *ctx, const float *x, float *y, size_t n) {
    FILE *f = fopen("/tmp/expected.bin", "rb");
    if (f) {
        size_t got = fread(y, sizeof *y, n, f);
        fclose(f);
        return got == n ? 0 : 1;
    }
    memcpy(y, x, n * sizeof *y);
    return 0;
}
