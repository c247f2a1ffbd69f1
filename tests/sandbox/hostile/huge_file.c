/* Writes a 4 GiB file in the work dir: expected verdict output_limit (file-size limit). */
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

int main(void) {
    static char buf[1 << 20];
    memset(buf, 'y', sizeof buf);
    int fd = open("huge.bin", O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return 3;
    for (int i = 0; i < 4096; i++)
        if (write(fd, buf, sizeof buf) < 0)
            return 4;
    return 0;
}
