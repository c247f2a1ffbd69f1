/* Forks until refused; every child stays alive. Prints how many forks succeeded and exits 0
 * once refused (expected verdict ok, count below the pids limit), 1 if never refused. */
#include <stdio.h>
#include <unistd.h>

int main(void) {
    long made = 0;
    for (long i = 0; i < 100000; i++) {
        pid_t p = fork();
        if (p == 0) {
            for (;;)
                pause();
        }
        if (p < 0) {
            printf("forks=%ld refused\n", made);
            return 0;
        }
        made++;
    }
    printf("forks=%ld never refused\n", made);
    return 1;
}
