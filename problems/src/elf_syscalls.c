/* Raw system calls in the candidate's host code. The candidate shares the runner's address
 * space, so the symbol allowlist only stops library calls; a `syscall`, `sysenter` or
 * `int 0x80` instruction would reach the kernel directly (the sandbox's seccomp filter still
 * bounds what it can do). Every executable section is scanned byte by byte, not disassembled:
 * a linear sweep can be led astray by a jump into the middle of an instruction, a byte scan
 * cannot. The price is a possible false match inside an immediate operand (none in the
 * shipped examples; docs/sandbox.md). */
#include "pk_elf_file.h"
#include "pk_harness_internal.h"

#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <string.h>

static const struct {
    unsigned char b0, b1;
    const char *name;
} patterns[] = {{0x0f, 0x05, "syscall"}, {0x0f, 0x34, "sysenter"}, {0xcd, 0x80, "int 0x80"}};

/* First match in [data, data + n): its offset, or -1; *which gets the instruction's name. */
static long find_raw_syscall(const unsigned char *data, size_t n, const char **which) {
    for (size_t i = 0; i + 1 < n; i++)
        for (size_t k = 0; k < sizeof patterns / sizeof *patterns; k++)
            if (data[i] == patterns[k].b0 && data[i + 1] == patterns[k].b1) {
                *which = patterns[k].name;
                return (long)i;
            }
    return -1;
}

int pk_elf_scan_syscalls(const char *so_path, pk_eval_result *res, pk_error *err) {
    pk_elf_file f;
    int rc = pk_elf_file_open(so_path, &f, err);
    if (rc)
        return rc;
    Elf *e = f.elf;
    size_t shstrndx = 0;
    if (elf_getshdrstrndx(e, &shstrndx) != 0) {
        pk_elf_file_close(&f);
        return pk_error_set(err, PK_ERR_INVALID, "%s: not an ELF object", so_path);
    }
    char found[160] = "";
    Elf_Scn *scn = NULL;
    while (!found[0] && (scn = elf_nextscn(e, scn))) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || !(sh.sh_flags & SHF_EXECINSTR) || sh.sh_type == SHT_NOBITS)
            continue;
        Elf_Data *data = NULL;
        size_t base = 0; /* a section may come in several data chunks: pairs can span them */
        unsigned char carry = 0;
        while (!found[0] && (data = elf_getdata(scn, data))) {
            const unsigned char *bytes = data->d_buf;
            const char *which = NULL;
            long at = -1;
            if (!bytes || !data->d_size)
                continue;
            if (base && (carry == 0x0f || carry == 0xcd)) {
                unsigned char pair[2] = {carry, bytes[0]};
                at = find_raw_syscall(pair, 2, &which) == 0 ? (long)base - 1 : -1;
            }
            if (at < 0) {
                long i = find_raw_syscall(bytes, data->d_size, &which);
                at = i < 0 ? -1 : (long)base + i;
            }
            if (at >= 0) {
                const char *name = elf_strptr(e, shstrndx, sh.sh_name);
                snprintf(found, sizeof found, "`%s` at %s+0x%lx", which, name ? name : "?", at);
            }
            carry = bytes[data->d_size - 1];
            base += data->d_size;
        }
    }
    pk_elf_file_close(&f);
    pk_eval_result_add_check(res, "symbols.raw_syscalls", !found[0], "%s",
                             found[0] ? found : "none");
    if (found[0] && res->status != PK_STATUS_REJECTED && res->status != PK_STATUS_FORMAT_ERROR) {
        res->status = PK_STATUS_REJECTED;
        snprintf(res->rule, sizeof res->rule, "raw_syscall");
        snprintf(res->reason, sizeof res->reason,
                 "the host code makes raw system calls (%s): use no inline syscall, sysenter "
                 "or int 0x80",
                 found);
    }
    return PK_OK;
}
