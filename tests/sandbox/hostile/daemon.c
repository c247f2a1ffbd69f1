/* Double-forks a daemon that touches ./heartbeat every 20 ms forever, then exits 0 at once.
 * Expected verdict ok; the daemon must not outlive the job. */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

int main(void) {
    pid_t p = fork();
    if (p == 0) {
        setsid();
        if (fork() != 0)
            _exit(0);
        for (;;) {
            int fd = open("heartbeat", O_WRONLY | O_CREAT | O_TRUNC, 0644);
            if (fd >= 0) {
                futimens(fd, NULL);
                close(fd);
            }
            usleep(20000);
        }
    }
    waitpid(p, NULL, 0);
    usleep(50000); /* let the daemon start beating */
    return 0;
}
