/* Calls what the seccomp filter must deny. Exit 0 only if every call failed. */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/bpf.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static int escaped;

static void check(const char *what, long rc) {
    if (rc >= 0) {
        printf("ESCAPED: %s\n", what);
        escaped = 1;
        if (rc == 0 && strncmp(what, "clone", 5) == 0)
            _exit(0); /* the child of a successful clone */
    } else {
        printf("blocked: %s (%s)\n", what, strerror(errno));
    }
}

int main(void) {
    union bpf_attr attr;
    memset(&attr, 0, sizeof attr);
    struct perf_event_attr pe;
    memset(&pe, 0, sizeof pe);
    pe.size = sizeof pe;
    pe.type = PERF_TYPE_SOFTWARE;
    check("unshare(CLONE_NEWUSER)", unshare(CLONE_NEWUSER));
    check("unshare(CLONE_NEWNET)", unshare(CLONE_NEWNET));
    check("unshare(CLONE_NEWNS)", unshare(CLONE_NEWNS));
    check("clone(CLONE_NEWPID)", syscall(SYS_clone, CLONE_NEWPID | SIGCHLD, 0, 0, 0, 0));
    check("clone(CLONE_NEWUSER)", syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, 0, 0, 0, 0));
    check("clone3", syscall(SYS_clone3, NULL, 0));
    check("setns", setns(0, 0));
    check("mount tmpfs", mount("none", "/tmp", "tmpfs", 0, NULL));
    check("umount /proc", umount2("/proc", MNT_DETACH));
    check("chroot", chroot("/tmp"));
    check("pivot_root", syscall(SYS_pivot_root, "/tmp", "/tmp"));
    check("bpf", syscall(SYS_bpf, BPF_PROG_LOAD, &attr, sizeof attr));
    check("perf_event_open", syscall(SYS_perf_event_open, &pe, 0, -1, -1, 0));
    check("keyctl", syscall(SYS_keyctl, 0 /* KEYCTL_GET_KEYRING_ID */, -3, 0));
    check("add_key", syscall(SYS_add_key, "user", "pk", "x", 1, -3));
    check("kexec_load", syscall(SYS_kexec_load, 0, 0, NULL, 0));
    check("init_module", syscall(SYS_init_module, NULL, 0, ""));
    check("ptrace(PTRACE_TRACEME)", syscall(SYS_ptrace, 0 /* PTRACE_TRACEME */, 0, 0, 0));
    check("io_uring_setup", syscall(SYS_io_uring_setup, 1, NULL));
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
    return escaped;
}
