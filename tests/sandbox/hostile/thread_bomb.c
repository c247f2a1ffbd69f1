/* Creates threads until refused. Prints the count and exits 0 once refused (expected verdict
 * ok, count below the pids limit), 1 if never refused. */
#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

static void *idle(void *arg) {
    (void)arg;
    for (;;)
        pause();
    return NULL;
}

int main(void) {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    long made = 0;
    for (long i = 0; i < 100000; i++) {
        pthread_t t;
        if (pthread_create(&t, &attr, idle, NULL)) {
            printf("threads=%ld refused\n", made);
            fflush(stdout);
            _exit(0);
        }
        made++;
    }
    printf("threads=%ld never refused\n", made);
    fflush(stdout);
    _exit(1);
}
