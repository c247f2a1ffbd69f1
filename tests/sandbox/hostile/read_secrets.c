/* Tries to read each path given (the host's /etc/shadow, the server's files, a canary).
 * Prints ESCAPED for every byte it gets; exit 0 only if every read failed. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int escaped = 0;
    for (int i = 1; i < argc; i++) {
        char buf[64];
        int fd = open(argv[i], O_RDONLY);
        ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf) : -1;
        if (n > 0) {
            printf("ESCAPED: read %zd bytes of %s\n", n, argv[i]);
            escaped = 1;
        } else {
            printf("blocked: %s (%s)\n", argv[i], strerror(errno));
        }
        if (fd >= 0)
            close(fd);
    }
    return escaped;
}
