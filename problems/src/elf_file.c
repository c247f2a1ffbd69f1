#include "pk_elf_file.h"

#include <fcntl.h>
#include <unistd.h>

int pk_elf_file_open(const char *path, pk_elf_file *f, pk_error *err) {
    f->fd = -1;
    f->elf = NULL;
    if (elf_version(EV_CURRENT) == EV_NONE)
        return pk_error_set(err, PK_ERR_INTERNAL, "libelf: %s", elf_errmsg(-1));
    f->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (f->fd < 0)
        return pk_error_errno(err, PK_ERR_IO, "open %s", path);
    f->elf = elf_begin(f->fd, ELF_C_READ, NULL);
    if (!f->elf || elf_kind(f->elf) != ELF_K_ELF) {
        pk_elf_file_close(f);
        return pk_error_set(err, PK_ERR_INVALID, "%s: not an ELF object", path);
    }
    return PK_OK;
}

void pk_elf_file_close(pk_elf_file *f) {
    if (f->elf)
        elf_end(f->elf);
    if (f->fd >= 0)
        close(f->fd);
    f->elf = NULL;
    f->fd = -1;
}
