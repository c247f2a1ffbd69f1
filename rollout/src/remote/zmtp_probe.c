/* The security mechanism of a ZeroMQ endpoint, read from its greeting (pk_zmtp_probe.h). */
#define _POSIX_C_SOURCE 200809L
#include "pk_zmtp_probe.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

enum { GREETING_BYTES = 64, MECHANISM_AT = 12, MECHANISM_BYTES = 20 };

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Waits for events on fd until the deadline: 1 when ready, 0 on timeout, -1 on error. */
static int wait_fd(int fd, short events, double deadline) {
    for (;;) {
        const double left = deadline - now_ms();
        if (left <= 0)
            return 0;
        struct pollfd p = {.fd = fd, .events = events};
        const int n = poll(&p, 1, (int)left + 1);
        if (n < 0 && errno == EINTR)
            continue;
        return n < 0 ? -1 : n > 0;
    }
}

/* A non-blocking socket connected (or connecting) to the endpoint's address, or -1. */
static int open_socket(const char *endpoint, double deadline, pk_error *err) {
    struct sockaddr_storage addr;
    socklen_t addr_len = 0;
    memset(&addr, 0, sizeof addr);
    if (strncmp(endpoint, "ipc://", 6) == 0) {
        struct sockaddr_un *un = (struct sockaddr_un *)&addr;
        if (strlen(endpoint + 6) >= sizeof un->sun_path) {
            pk_error_set(err, PK_ERR_INVALID, "%s: the path is too long", endpoint);
            return -1;
        }
        un->sun_family = AF_UNIX;
        strcpy(un->sun_path, endpoint + 6);
        addr_len = sizeof *un;
    } else if (strncmp(endpoint, "tcp://", 6) == 0) {
        char host[256];
        const char *hp = endpoint + 6, *colon = strrchr(hp, ':');
        size_t n = colon ? (size_t)(colon - hp) : 0;
        if (n >= 2 && hp[0] == '[' && hp[n - 1] == ']') { /* [IPv6 address] */
            hp++;
            n -= 2;
        }
        if (!colon || n == 0 || n >= sizeof host || !colon[1]) {
            pk_error_set(err, PK_ERR_INVALID, "%s: not tcp://HOST:PORT", endpoint);
            return -1;
        }
        memcpy(host, hp, n);
        host[n] = '\0';
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
        const int g = getaddrinfo(host, colon + 1, &hints, &ai);
        if (g != 0 || !ai) {
            pk_error_set(err, PK_ERR_INVALID, "%s: %s", endpoint, gai_strerror(g));
            return -1;
        }
        memcpy(&addr, ai->ai_addr, ai->ai_addrlen);
        addr_len = ai->ai_addrlen;
        freeaddrinfo(ai);
    } else {
        pk_error_set(err, PK_ERR_UNSUPPORTED, "%s: only tcp:// and ipc:// can be probed", endpoint);
        return -1;
    }
    const int fd = socket(addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        pk_error_errno(err, PK_ERR_SYSTEM, "%s: socket", endpoint);
        return -1;
    }
    if (connect(fd, (struct sockaddr *)&addr, addr_len) != 0 && errno != EINPROGRESS) {
        pk_error_errno(err, PK_ERR_IO, "%s: connect", endpoint);
        close(fd);
        return -1;
    }
    int ready = wait_fd(fd, POLLOUT, deadline), so_error = 0;
    socklen_t len = sizeof so_error;
    if (ready > 0 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len) == 0 && so_error == 0)
        return fd;
    if (ready > 0 && so_error) {
        errno = so_error;
        pk_error_errno(err, PK_ERR_IO, "%s: connect", endpoint);
    } else {
        pk_error_set(err, PK_ERR_TIMEOUT, "%s: no connection", endpoint);
    }
    close(fd);
    return -1;
}

int pk_zmtp_probe_mechanism(const char *endpoint, int timeout_ms, char mechanism[21],
                            pk_error *err) {
    const double deadline = now_ms() + timeout_ms;
    mechanism[0] = '\0';
    const int fd = open_socket(endpoint, deadline, err);
    if (fd < 0)
        return err ? err->code : PK_ERR_IO;
    /* Signature (0xff, 8 bytes of padding, 0x7f) and major version 3: enough for the peer to
     * send its whole greeting, which holds its mechanism. */
    static const unsigned char start[11] = {0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f, 3};
    unsigned char greeting[GREETING_BYTES];
    size_t sent = 0, got = 0;
    int rc = PK_OK;
    while (rc == PK_OK && got < sizeof greeting) {
        const short want = sent < sizeof start ? POLLOUT | POLLIN : POLLIN;
        const int ready = wait_fd(fd, want, deadline);
        if (ready <= 0) {
            rc = pk_error_set(err, PK_ERR_TIMEOUT, "%s: no ZMTP greeting within %d ms", endpoint,
                              timeout_ms);
            break;
        }
        if (sent < sizeof start) {
            const ssize_t n = send(fd, start + sent, sizeof start - sent, MSG_NOSIGNAL);
            if (n > 0)
                sent += (size_t)n;
            else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
                rc = pk_error_errno(err, PK_ERR_IO, "%s: send", endpoint);
            if (rc != PK_OK)
                break;
        }
        const ssize_t n = recv(fd, greeting + got, sizeof greeting - got, 0);
        if (n > 0) {
            got += (size_t)n;
            if (greeting[0] != 0xff || (got >= 10 && !(greeting[9] & 1)))
                break; /* not ZMTP 3: said below, without waiting for bytes that may never come */
        } else if (n == 0 || errno == ECONNRESET) {
            rc = pk_error_set(err, PK_ERR_IO,
                              "%s: closed the connection after %zu bytes of its greeting", endpoint,
                              got);
        } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            rc = pk_error_errno(err, PK_ERR_IO, "%s: recv", endpoint);
        }
    }
    close(fd);
    if (rc != PK_OK)
        return rc;
    if (got < sizeof greeting || greeting[0] != 0xff || !(greeting[9] & 1) || greeting[10] < 3)
        return pk_error_set(err, PK_ERR_INVALID, "%s: no ZMTP 3 greeting", endpoint);
    size_t len = 0;
    while (len < MECHANISM_BYTES && greeting[MECHANISM_AT + len] != 0) {
        const unsigned char c = greeting[MECHANISM_AT + len];
        if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_'))
            return pk_error_set(err, PK_ERR_INVALID, "%s: a ZMTP mechanism name of bad bytes",
                                endpoint);
        len++;
    }
    if (len == 0)
        return pk_error_set(err, PK_ERR_INVALID, "%s: an empty ZMTP mechanism", endpoint);
    memcpy(mechanism, greeting + MECHANISM_AT, len);
    mechanism[len] = '\0';
    return PK_OK;
}
