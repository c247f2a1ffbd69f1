/* Kernel names as the two profilers give them: CUPTI mangled, ncu demangled. */
#include "pk_profile.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void copy(char *out, size_t cap, const char *s, size_t n) {
    if (n >= cap)
        n = cap - 1;
    memcpy(out, s, n);
    out[n] = 0;
}

/* _Z<len><id>... or _ZN<len><id><len><id>...E...: the last component before E or I. */
static int from_mangled(const char *s, char *out, size_t cap) {
    const char *p = s + 2;
    int nested = *p == 'N';
    if (nested) {
        p++;
        while (*p == 'K' || *p == 'V' || *p == 'r')
            p++;
    }
    const char *last = NULL;
    size_t last_n = 0;
    while (isdigit((unsigned char)*p)) {
        char *end;
        long n = strtol(p, &end, 10);
        if (n <= 0 || (size_t)n > strlen(end))
            break;
        last = end;
        last_n = (size_t)n;
        p = end + n;
        if (!nested)
            break;
    }
    if (!last)
        return 0;
    copy(out, cap, last, last_n);
    return 1;
}

void pk_profile_kernel_base(const char *name, char *out, size_t cap) {
    if (!name || !cap) {
        if (cap)
            out[0] = 0;
        return;
    }
    if (!strncmp(name, "_Z", 2) && from_mangled(name, out, cap))
        return;
    /* Demangled: up to the parameter list, then template arguments off, then the last
     * whitespace-separated word (the return type goes), then the last :: component. */
    size_t n = strcspn(name, "(");
    size_t lt = strcspn(name, "<");
    if (lt < n)
        n = lt;
    while (n > 0 && isspace((unsigned char)name[n - 1]))
        n--;
    size_t start = 0;
    for (size_t i = 0; i < n; i++)
        if (isspace((unsigned char)name[i]) || (name[i] == ':' && i + 1 < n && name[i + 1] == ':'))
            start = i + (name[i] == ':' ? 2 : 1);
    copy(out, cap, name + start, n - start);
    if (!out[0])
        copy(out, cap, name, strlen(name));
}

int pk_profile_kernel_is_comm(const char *name) {
    char base[128];
    pk_profile_kernel_base(name, base, sizeof base);
    return !strncmp(base, "nccl", 4);
}
