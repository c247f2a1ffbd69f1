/* Allocates and touches 1 MiB blocks up to 8 GiB: expected verdict memory under --mem-mb. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void) {
    for (int i = 0; i < 8192; i++) {
        char *p = malloc(1 << 20);
        if (!p) {
            printf("malloc refused after %d MiB\n", i);
            return 2;
        }
        memset(p, i, 1 << 20);
    }
    printf("8 GiB allocated\n");
    return 0;
}
