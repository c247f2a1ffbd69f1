/* A compiled candidate opened for libelf, shared by the symbol checks (elf_check.c) and the
 * raw-syscall scan (elf_syscalls.c). */
#ifndef PK_ELF_FILE_H
#define PK_ELF_FILE_H

#include <libelf.h>

#include "pk_common.h"

typedef struct pk_elf_file {
    int fd;
    Elf *elf;
} pk_elf_file;

/* PK_ERR_IO when the file cannot be opened, PK_ERR_INVALID when it is not an ELF object.
 * On PK_OK, pk_elf_file_close releases it. */
int pk_elf_file_open(const char *path, pk_elf_file *f, pk_error *err);
void pk_elf_file_close(pk_elf_file *f);

#endif
