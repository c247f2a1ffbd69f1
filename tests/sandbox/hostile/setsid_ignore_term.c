/* A setsid child that ignores SIGTERM and touches ./heartbeat; the parent sleeps forever.
 * Expected verdict timeout; nothing may survive it. */
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

int main(void) {
    if (fork() == 0) {
        setsid();
        signal(SIGTERM, SIG_IGN);
        signal(SIGHUP, SIG_IGN);
        for (;;) {
            int fd = open("heartbeat", O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (fd >= 0) {
                futimens(fd, NULL);
                close(fd);
            }
            usleep(20000);
        }
    }
    for (;;)
        pause();
}
