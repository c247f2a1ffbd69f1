/* Tries to kill its parent, PID 1 and everything it can signal, then exits 0 if it is still
 * being supervised (expected verdict ok: the sandbox's init survives). */
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

int main(void) {
    kill(getppid(), SIGKILL);
    kill(1, SIGKILL);
    kill(-1, SIGKILL);
    usleep(100000);
    printf("still supervised, parent=%d\n", (int)getppid());
    return 0;
}
