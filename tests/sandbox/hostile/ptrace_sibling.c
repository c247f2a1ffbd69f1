/* Tries ptrace and process_vm_readv on a sibling. Exit 0 only if all were denied. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

static int secret = 42;

int main(void) {
    pid_t child = fork();
    if (child == 0) {
        for (;;)
            pause();
    }
    int escaped = 0;
    if (ptrace(PTRACE_ATTACH, child, 0, 0) == 0) {
        printf("ESCAPED: PTRACE_ATTACH\n");
        escaped = 1;
    } else {
        printf("blocked: PTRACE_ATTACH (%s)\n", strerror(errno));
    }
    if (ptrace(PTRACE_SEIZE, child, 0, 0) == 0) {
        printf("ESCAPED: PTRACE_SEIZE\n");
        escaped = 1;
    } else {
        printf("blocked: PTRACE_SEIZE (%s)\n", strerror(errno));
    }
    int got = 0;
    struct iovec local = {&got, sizeof got}, remote = {&secret, sizeof secret};
    if (process_vm_readv(child, &local, 1, &remote, 1, 0) > 0) {
        printf("ESCAPED: process_vm_readv read %d\n", got);
        escaped = 1;
    } else {
        printf("blocked: process_vm_readv (%s)\n", strerror(errno));
    }
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    return escaped;
}
