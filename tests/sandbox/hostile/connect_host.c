/* Connects to a port the test listens on, on the host's loopback. Exit 0 if refused. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 2)
        return 2;
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((unsigned short)atoi(argv[1]))};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (s >= 0 && connect(s, (struct sockaddr *)&a, sizeof a) == 0) {
        printf("ESCAPED: connected to the host's port %s\n", argv[1]);
        return 1;
    }
    printf("blocked: connect 127.0.0.1:%s (%s)\n", argv[1], strerror(errno));
    return 0;
}
