/* Aborts: expected verdict signal 6. */
#include <stdlib.h>

int main(void) {
    abort();
}
