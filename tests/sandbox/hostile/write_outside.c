/* Tries to create each path given (outside the work dir). Exit 0 only if all were refused. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int escaped = 0;
    for (int i = 1; i < argc; i++) {
        int fd = open(argv[i], O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0 && write(fd, "pwned\n", 6) == 6) {
            printf("ESCAPED: wrote %s\n", argv[i]);
            escaped = 1;
        } else {
            printf("blocked: %s (%s)\n", argv[i], strerror(errno));
        }
        if (fd >= 0)
            close(fd);
    }
    return escaped;
}
