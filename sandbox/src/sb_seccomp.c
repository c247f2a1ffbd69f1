/* The seccomp filter, built with libseccomp once per process and exported as a BPF program
 * that the child installs with a bare system call. Default allow; the calls below fail with
 * EPERM (clone3 with ENOSYS, so that libc falls back to clone, whose flags we can inspect). */
#define _GNU_SOURCE
#include "sb_internal.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const sb_denied[] = {
    /* looking into or driving other processes (pidfd_getfd stays: it reaches only this job's
     * processes, like /proc/<pid>/mem, and CUDA VMM fd sharing may need it) */
    "ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "kcmp",
    /* the filesystem view */
    "mount", "umount", "umount2", "pivot_root", "chroot", "mount_setattr", "move_mount",
    "open_tree", "fsopen", "fsconfig", "fsmount", "fspick", "name_to_handle_at",
    "open_by_handle_at",
    /* namespaces from inside */
    "unshare", "setns",
    /* the kernel itself */
    "bpf", "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "reboot", "swapon", "swapoff", "syslog", "acct", "quotactl", "lookup_dcookie", "iopl", "ioperm",
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "sethostname", "setdomainname",
    "vhangup", "uselib", "userfaultfd", "fanotify_init",
    /* keys, perf, and io_uring (its operations bypass this filter) */
    "keyctl", "add_key", "request_key", "perf_event_open", "io_uring_setup", "io_uring_enter",
    "io_uring_register", NULL};

static const unsigned long sb_ns_flags[] = {CLONE_NEWNS,     CLONE_NEWUSER, CLONE_NEWPID,
                                            CLONE_NEWNET,    CLONE_NEWIPC,  CLONE_NEWUTS,
                                            CLONE_NEWCGROUP, 0x00000080 /* CLONE_NEWTIME */};

static pthread_once_t sb_once = PTHREAD_ONCE_INIT;
static struct sock_fprog sb_prog;
static char sb_error[256];

static int build_filter(scmp_filter_ctx ctx) {
    for (int i = 0; sb_denied[i]; i++) {
        int nr = seccomp_syscall_resolve_name(sb_denied[i]);
        if (nr == __NR_SCMP_ERROR)
            continue; /* not a system call on this architecture */
        if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0))
            return -1;
    }
    if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0))
        return -1;
    /* No setuid or setgid files: the command is host uid 0 without capabilities, and such a
     * file left in the work dir would be a root setuid binary on the host. */
    static const struct {
        const char *name;
        unsigned arg;
    } mode_calls[] = {{"chmod", 1},  {"fchmod", 1}, {"fchmodat", 2}, {"open", 2},
                      {"openat", 3}, {"creat", 1},  {"mknod", 1},    {"mknodat", 2}};
    for (size_t i = 0; i < sizeof mode_calls / sizeof *mode_calls; i++) {
        int nr = seccomp_syscall_resolve_name(mode_calls[i].name);
        for (int bit = 0; nr != __NR_SCMP_ERROR && bit < 2; bit++) {
            scmp_datum_t m = bit ? S_ISGID : S_ISUID;
            if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 1,
                                 SCMP_CMP(mode_calls[i].arg, SCMP_CMP_MASKED_EQ, m, m)))
                return -1;
        }
    }
    /* Calls whose mode or flags sit in a struct the filter cannot read: libc falls back. */
    if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(openat2), 0))
        return -1;
#ifdef __x86_64__
    if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), 452 /* fchmodat2 */, 0))
        return -1;
#endif
    for (size_t i = 0; i < sizeof sb_ns_flags / sizeof *sb_ns_flags; i++)
        if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                             SCMP_A0(SCMP_CMP_MASKED_EQ, sb_ns_flags[i], sb_ns_flags[i])))
            return -1;
    return 0;
}

static void build_once(void) {
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx) {
        strcpy(sb_error, "seccomp_init failed");
        return;
    }
    int fd = -1;
    if (build_filter(ctx)) {
        strcpy(sb_error, "seccomp_rule_add failed");
        goto out;
    }
    fd = memfd_create("pk-seccomp", MFD_CLOEXEC);
    if (fd < 0 || seccomp_export_bpf(ctx, fd)) {
        strcpy(sb_error, "seccomp_export_bpf failed");
        goto out;
    }
    off_t len = lseek(fd, 0, SEEK_END);
    if (len <= 0 || len % (off_t)sizeof(struct sock_filter) || lseek(fd, 0, SEEK_SET)) {
        strcpy(sb_error, "seccomp program has a bad size");
        goto out;
    }
    struct sock_filter *f = malloc((size_t)len);
    if (!f || read(fd, f, (size_t)len) != (ssize_t)len) {
        free(f);
        strcpy(sb_error, "reading the seccomp program failed");
        goto out;
    }
    sb_prog.len = (unsigned short)(len / (off_t)sizeof(struct sock_filter));
    sb_prog.filter = f; /* kept for the life of the process */
out:
    if (fd >= 0)
        close(fd);
    seccomp_release(ctx);
}

const struct sock_fprog *sb_seccomp_program(pk_error *err) {
    pthread_once(&sb_once, build_once);
    if (!sb_prog.filter) {
        pk_error_set(err, PK_ERR_SYSTEM, "seccomp: %s", sb_error);
        return NULL;
    }
    return &sb_prog;
}
