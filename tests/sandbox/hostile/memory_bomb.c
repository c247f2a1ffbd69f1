/* Allocates and touches 1 MiB blocks up to 8 GiB: expected verdict memory under --mem-mb.
 * The blocks are kept and summed, so that no compiler can elide the allocations. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *blocks[8192];

int main(void) {
    long sum = 0;
    for (int i = 0; i < 8192; i++) {
        blocks[i] = malloc(1 << 20);
        if (!blocks[i]) {
            printf("malloc refused after %d MiB\n", i);
            return 2;
        }
        memset(blocks[i], i, 1 << 20);
        sum += blocks[i][i % (1 << 20)];
    }
    printf("8 GiB allocated (%ld)\n", sum);
    return 0;
}
