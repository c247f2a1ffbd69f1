/* The command's environment. The default is small and names only what the toolchain and the
 * multi-GPU runtimes need; NCCL_NVLS_ENABLE=0 is always present (NVLink multicast is off on
 * our machines), whatever the caller passes. */
#define _GNU_SOURCE
#include "sb_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SANITIZE_ADDRESS__)
#define SB_UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SB_UNDER_ASAN 1
#endif
#endif
#ifdef SB_UNDER_ASAN
#define SB_ASAN_FORCED 1
#else
#define SB_ASAN_FORCED 0
#endif

static const char *const sb_default_env[] = {
    "PATH=/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "TMPDIR=/tmp", "LC_ALL=C", "NCCL_SOCKET_IFNAME=lo",
    /* Inside, the command is uid 0 of its user namespace. */
    "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
    /* Open MPI's single-copy path uses process_vm_readv, which the filter denies. */
    "OMPI_MCA_btl_vader_single_copy_mechanism=none", NULL};

static int push(char ***env, int *n, int *cap, char *s) {
    if (!s)
        return -1;
    if (*n + 2 > *cap) {
        int c = *cap ? 2 * *cap : 32;
        char **e = realloc(*env, (size_t)c * sizeof *e);
        if (!e) {
            free(s);
            return -1;
        }
        *env = e;
        *cap = c;
    }
    (*env)[(*n)++] = s;
    (*env)[*n] = NULL;
    return 0;
}

/* An added NAME=VALUE replaces an earlier NAME. */
static int replace_or_push(char ***env, int *n, int *cap, const char *entry) {
    const char *eq = strchr(entry, '=');
    size_t name_len = eq ? (size_t)(eq - entry) + 1 : strlen(entry);
    for (int i = 0; i < *n; i++)
        if (strncmp((*env)[i], entry, name_len) == 0) {
            char *copy = strdup(entry);
            if (!copy)
                return -1;
            free((*env)[i]);
            (*env)[i] = copy;
            return 0;
        }
    return push(env, n, cap, strdup(entry));
}

static char *concat(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    char *s = malloc(la + lb + 1);
    if (s) {
        memcpy(s, a, la);
        memcpy(s + la, b, lb + 1);
    }
    return s;
}

static int forced(const char *entry) {
    return strncmp(entry, "NCCL_NVLS_ENABLE=", 17) == 0 ||
           (SB_ASAN_FORCED && strncmp(entry, "ASAN_OPTIONS=", 13) == 0);
}

char **sb_env_build(const pk_sandbox_opts *opts, const char *workdir, const char *cuda_visible) {
    char **env = NULL;
    int n = 0, cap = 0, rc = 0;
    if (opts->env) {
        for (int i = 0; opts->env[i] && !rc; i++)
            if (!forced(opts->env[i]))
                rc = push(&env, &n, &cap, strdup(opts->env[i]));
    } else {
        for (int i = 0; sb_default_env[i] && !rc; i++)
            rc = push(&env, &n, &cap, strdup(sb_default_env[i]));
        if (!rc)
            rc = push(&env, &n, &cap, concat("HOME=", workdir));
        const char *ld = getenv("LD_LIBRARY_PATH");
        if (!rc && ld && *ld)
            rc = push(&env, &n, &cap, concat("LD_LIBRARY_PATH=", ld));
        if (!rc && cuda_visible) {
            /* UUIDs (or positions among the job's GPUs): CUDA inside enumerates only the GPUs
             * whose nodes are bound, so host indices would name the wrong ones or none. */
            rc = push(&env, &n, &cap, concat("CUDA_VISIBLE_DEVICES=", cuda_visible));
            if (!rc)
                rc = push(&env, &n, &cap, strdup("CUDA_DEVICE_ORDER=PCI_BUS_ID"));
        }
    }
    for (int i = 0; opts->env_add && opts->env_add[i] && !rc; i++)
        if (!forced(opts->env_add[i]))
            rc = replace_or_push(&env, &n, &cap, opts->env_add[i]);
    if (!rc)
        rc = push(&env, &n, &cap, strdup("NCCL_NVLS_ENABLE=0"));
    /* LeakSanitizer needs ptrace, which the filter denies. */
    if (!rc && SB_ASAN_FORCED)
        rc = push(&env, &n, &cap, strdup("ASAN_OPTIONS=detect_leaks=0"));
    if (rc) {
        sb_env_free(env);
        return NULL;
    }
    return env;
}

void sb_env_free(char **env) {
    for (int i = 0; env && env[i]; i++)
        free(env[i]);
    free(env);
}
