// Hostile (#25): floods stderr while it is loaded (past the sandbox's output cap, to push the
// runner's set-up marker out of what the harness keeps), then exits with the runner's
// set-up-failure status. The marker came first and the harness keeps the first bytes:
// runtime_error, never infra_error.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_ctx.h"

__attribute__((constructor)) static void flood(void) {
    static char line[1024];
    memset(line, 'x', sizeof line - 2);
    line[sizeof line - 2] = '\n';
    for (int i = 0; i < 256; i++)
        fputs(line, stderr);
    fflush(stderr);
    exit(3); /* PK_RUNNER_EXIT_INFRA */
}

extern "C" int solution(const pk_ctx *ctx, const float *x, float *y, size_t n) {
    memcpy(y, x, n * sizeof *y);
    return 0;
}
