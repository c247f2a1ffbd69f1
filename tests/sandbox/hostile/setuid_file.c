/* Tries to leave a setuid/setgid file in the work dir (on the host it would be a root setuid
 * binary). Exit 0 only if no such bit stuck. */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

static int check(const char *what, const char *path) {
    struct stat st;
    if (stat(path, &st) == 0 && (st.st_mode & (S_ISUID | S_ISGID))) {
        printf("ESCAPED: %s left mode %o\n", what, (unsigned)st.st_mode & 07777);
        return 1;
    }
    printf("blocked: %s\n", what);
    return 0;
}

int main(void) {
    int escaped = 0;
    int fd = open("suid-open", O_WRONLY | O_CREAT | O_TRUNC, 04755);
    if (fd >= 0)
        close(fd);
    escaped |= check("open(O_CREAT, 04755)", "suid-open");
    fd = open("suid-chmod", O_WRONLY | O_CREAT | O_TRUNC, 0755);
    if (fd >= 0) {
        fchmod(fd, 02755);
        close(fd);
    }
    escaped |= check("fchmod(02755)", "suid-chmod");
    chmod("suid-chmod", 04755);
    escaped |= check("chmod(04755)", "suid-chmod");
    fchmodat(AT_FDCWD, "suid-chmod", 06755, 0);
    escaped |= check("fchmodat(06755)", "suid-chmod");
    return escaped;
}
