/* Writes 10 GB to stdout: expected verdict output_limit, long before 10 GB. */
#include <string.h>
#include <unistd.h>

int main(void) {
    static char buf[1 << 20];
    memset(buf, 'x', sizeof buf);
    for (long i = 0; i < 10L * 1024; i++)
        if (write(1, buf, sizeof buf) < 0)
            return 1;
    return 0;
}
