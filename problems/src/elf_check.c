/* Symbol checks on the compiled candidate with libelf (.dynsym only: what the loader sees). */
#include "pk_elf_file.h"
#include "pk_harness_internal.h"

#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <string.h>

/* Undefined symbols every candidate may use: CUDA runtime and its registration stubs, libm,
 * libc memory functions, stdio output, and the C++ runtime bits nvcc emits. */
static const char *const base_allow[] = {
    "cuda*",
    "__cuda*",
    "sqrt*",
    "cbrt*",
    "exp*",
    "log*",
    "pow*",
    "fabs*",
    "floor*",
    "ceil*",
    "round*",
    "trunc*",
    "fmax*",
    "fmin*",
    "fmod*",
    "sin*",
    "cos*",
    "tan*",
    "erf*",
    "hypot*",
    "rint*",
    "lrint*",
    "llrint*",
    "lround*",
    "llround*",
    "nearbyint*",
    "frexp*",
    "ldexp*",
    "scalbn*",
    "modf*",
    "copysign*",
    "fma*",
    "atan*",
    "asin*",
    "acos*",
    "memcpy",
    "memset",
    "memmove",
    "memcmp",
    "malloc",
    "free",
    "calloc",
    "realloc",
    "posix_memalign",
    "aligned_alloc",
    "strlen",
    "__memcpy_chk",
    "__memset_chk",
    "__memmove_chk",
    "printf",
    "puts",
    "putchar",
    "fprintf",
    "fputs",
    "fputc",
    "putc",
    "fwrite",
    "fflush",
    "stdout",
    "stderr",
    "__printf_chk",
    "__fprintf_chk",
    "__cxa_*",
    "__gxx_personality_v0",
    "_Unwind_*",
    "_Znwm*",
    "_Znam*",
    "_ZdlPv*",
    "_ZdaPv*",
    "_ZSt9terminatev",
    "_ZNSt8ios_base4Init*",
    "__stack_chk_fail",
    "__dso_handle",
    "_ITM_*",
    "__gmon_start__",
    /* nvcc gives every external __device__ function a host stub that calls exit(1); a rank
     * that exits ends without the runner's result, which is a failure (selftest exits_early). */
    "exit",
};
static const char *const gpu_allow[] = {"nccl*"};
static const char *const cublas_allow[] = {"cublas*"}; /* cublas* and cublasLt* */
static const char *const cufft_allow[] = {"cufft*"};   /* cufft* and cufftXt* */
static const char *const host_allow[] = {"MPI_*", "ompi_mpi_*"};

/* Names a candidate must not define: they would interpose the runtime, NCCL, MPI, libc, the
 * dynamic loader, threads or the harness. */
static const char *const protected_names[] = {
    "cuda*",    "__cuda*",   "nccl*",     "pnccl*", "MPI_*",        "PMPI_*",  "ompi_*",
    "cublas*",  "pk_*",      "pthread_*", "dl*",    "__libc_*",     "malloc",  "free",
    "calloc",   "realloc",   "mem*",      "str*",   "printf",       "fprintf", "vprintf",
    "vfprintf", "puts",      "write",     "read",   "open*",        "close",   "fopen*",
    "fclose",   "fwrite",    "fread",     "clock*", "gettimeofday", "time",    "nanosleep",
    "usleep",   "sleep",     "exit",      "_exit",  "abort",        "getenv",  "setenv",
    "fork",     "exec*",     "system",    "mmap*",  "munmap",       "syscall", "ioctl",
    "signal",   "sigaction", "raise",     "kill",   "cufft*",
};

#define N(a) (sizeof a / sizeof *a)

int pk_symbol_matches(const char *pattern, const char *name) {
    size_t n = strlen(pattern);
    if (n && pattern[n - 1] == '*')
        return strncmp(pattern, name, n - 1) == 0;
    return strcmp(pattern, name) == 0;
}

static int in_list(const char *const *list, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (pk_symbol_matches(list[i], name))
            return 1;
    return 0;
}

static int in_string_list(const pk_string_list *l, const char *name) {
    return in_list((const char *const *)l->items, (size_t)l->n, name);
}

/* Accumulates the offending names of one rule into a detail line. */
typedef struct offenders {
    int count;
    char names[200];
} offenders;

static void offend(offenders *o, const char *name) {
    size_t used = strlen(o->names);
    if (o->count++ < 6 && used + strlen(name) + 3 < sizeof o->names)
        snprintf(o->names + used, sizeof o->names - used, "%s%s", used ? ", " : "", name);
}

static void reject(pk_eval_result *res, const char *rule, const char *fmt, const char *names) {
    if (res->status == PK_STATUS_REJECTED || res->status == PK_STATUS_FORMAT_ERROR)
        return; /* the first rule that fired names the verdict */
    res->status = PK_STATUS_REJECTED;
    snprintf(res->rule, sizeof res->rule, "%s", rule);
    snprintf(res->reason, sizeof res->reason, fmt, names);
}

static void classify(const pk_problem *p, const char *name, int defined, int is_func,
                     offenders *interp, offenders *forbidden, offenders *unknown, int *has_entry) {
    if (defined) {
        if (strcmp(name, p->entry) == 0) {
            *has_entry = is_func;
            return;
        }
        int driver_api = name[0] == 'c' && name[1] == 'u' && name[2] >= 'A' && name[2] <= 'Z';
        if (driver_api || in_list(protected_names, N(protected_names), name))
            offend(interp, name);
        return;
    }
    if (in_string_list(&p->forbidden_calls, name)) {
        offend(forbidden, name);
        return;
    }
    int ok = in_list(base_allow, N(base_allow), name) || in_string_list(&p->allowed_calls, name) ||
             (p->device_gpu ? in_list(gpu_allow, N(gpu_allow), name)
                            : in_list(host_allow, N(host_allow), name)) ||
             (p->link_cublas && in_list(cublas_allow, N(cublas_allow), name)) ||
             (p->link_cufft && in_list(cufft_allow, N(cufft_allow), name));
    if (!ok)
        offend(unknown, name);
}

int pk_elf_check(const char *so_path, const pk_problem *p, pk_eval_result *res, pk_error *err) {
    pk_elf_file f;
    int rc = pk_elf_file_open(so_path, &f, err);
    if (rc)
        return rc;
    Elf *e = f.elf;
    offenders interp = {0}, forbidden = {0}, unknown = {0};
    int has_entry = 0, has_dynsym = 0;
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(e, scn))) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM || !sh.sh_entsize)
            continue;
        has_dynsym = 1;
        Elf_Data *data = elf_getdata(scn, NULL);
        size_t n = data ? sh.sh_size / sh.sh_entsize : 0;
        for (size_t i = 1; i < n; i++) {
            GElf_Sym s;
            if (!gelf_getsym(data, (int)i, &s))
                continue;
            const char *name = elf_strptr(e, sh.sh_link, s.st_name);
            int bind = GELF_ST_BIND(s.st_info), type = GELF_ST_TYPE(s.st_info);
            if (!name || !*name || bind == STB_LOCAL || type == STT_SECTION || type == STT_FILE)
                continue;
            int defined = s.st_shndx != SHN_UNDEF;
            if (defined && GELF_ST_VISIBILITY(s.st_other) != STV_DEFAULT)
                continue;
            classify(p, name, defined, type == STT_FUNC, &interp, &forbidden, &unknown, &has_entry);
        }
    }
    pk_elf_file_close(&f);
    if (!has_dynsym)
        return pk_error_set(err, PK_ERR_INVALID, "%s: no dynamic symbol table", so_path);

    pk_eval_result_add_check(res, "symbols.entry_point", has_entry,
                             has_entry ? "%s defined" : "%s is not defined as a function",
                             p->entry);
    if (!has_entry) {
        res->status = PK_STATUS_FORMAT_ERROR;
        snprintf(res->reason, sizeof res->reason,
                 "the entry point %s is not defined (expected: %s)", p->entry, p->signature);
    }
    pk_eval_result_add_check(res, "symbols.interposition", interp.count == 0,
                             interp.count ? "defines runtime/library symbols: %s" : "none%s",
                             interp.names);
    if (interp.count)
        reject(res, "interposition", "defines symbols that would interpose the runtime: %s",
               interp.names);
    pk_eval_result_add_check(res, "symbols.forbidden_calls", forbidden.count == 0,
                             forbidden.count ? "calls forbidden by this problem: %s" : "none%s",
                             forbidden.names);
    if (forbidden.count)
        reject(res, "forbidden_call", "calls what this problem forbids: %s", forbidden.names);
    pk_eval_result_add_check(res, "symbols.undefined_allowlist", unknown.count == 0,
                             unknown.count ? "uses symbols outside the allowlist: %s" : "ok%s",
                             unknown.names);
    if (unknown.count)
        reject(res, "symbol_allowlist", "uses symbols outside the allowlist: %s", unknown.names);
    return PK_OK;
}
