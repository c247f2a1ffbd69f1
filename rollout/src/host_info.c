/* Reads the GPU model and driver from /proc/driver/nvidia, the NCCL version by dlopen, and the
 * GPUs' free memory through NVML (dlopen, so no build or run dependency on the driver). */
#include "pk_host_info.h"

#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pk_common.h"

/* The value after "<key>:" in a "Key: value" text, trimmed, or 0. */
static int field(const char *text, const char *key, char *out, size_t cap) {
    const char *p = strstr(text, key);
    if (!p || !(p = strchr(p, ':')))
        return 0;
    p++;
    while (*p == ' ' || *p == '\t')
        p++;
    size_t n = strcspn(p, "\n");
    while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t'))
        n--;
    if (n == 0)
        return 0;
    snprintf(out, cap, "%.*s", (int)n, p);
    return 1;
}

static void read_gpu_model(char *out, size_t cap) {
    snprintf(out, cap, "none");
    DIR *d = opendir("/proc/driver/nvidia/gpus");
    if (!d)
        return;
    char first[256] = "";
    struct dirent *e;
    while ((e = readdir(d))) {
        /* PCI bus ids sort in device order; keep the smallest. */
        if (e->d_name[0] != '.' && (!first[0] || strcmp(e->d_name, first) < 0))
            snprintf(first, sizeof first, "%s", e->d_name);
    }
    closedir(d);
    if (!first[0])
        return;
    char path[512], *text = NULL;
    snprintf(path, sizeof path, "/proc/driver/nvidia/gpus/%s/information", first);
    if (pk_read_file(path, &text, NULL, NULL) == PK_OK)
        field(text, "Model", out, cap);
    free(text);
}

static void read_driver(char *out, size_t cap) {
    snprintf(out, cap, "none");
    char *text = NULL;
    if (pk_read_file("/proc/driver/nvidia/version", &text, NULL, NULL) != PK_OK)
        return;
    /* "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159  ..." */
    const char *p = strstr(text, "Kernel Module");
    if (p) {
        p += strlen("Kernel Module");
        while (*p == ' ')
            p++;
        snprintf(out, cap, "%.*s", (int)strcspn(p, " \n"), p);
    }
    free(text);
}

static void read_nccl(char *out, size_t cap) {
    snprintf(out, cap, "unknown");
    void *lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return;
    int (*get_version)(int *) = (int (*)(int *))dlsym(lib, "ncclGetVersion");
    int v = 0;
    if (get_version && get_version(&v) == 0 && v > 0)
        snprintf(out, cap, "%d", v);
    dlclose(lib);
}

void pk_host_info_read(pk_host_info *out) {
    memset(out, 0, sizeof *out);
    read_gpu_model(out->gpu_model, sizeof out->gpu_model);
    read_driver(out->driver, sizeof out->driver);
    read_nccl(out->nccl, sizeof out->nccl);
    snprintf(out->cpu_model, sizeof out->cpu_model, "unknown");
    char *text = NULL;
    if (pk_read_file("/proc/cpuinfo", &text, NULL, NULL) == PK_OK)
        field(text, "model name", out->cpu_model, sizeof out->cpu_model);
    free(text);
}

typedef struct nvml_memory {
    unsigned long long total, free, used;
} nvml_memory;

long pk_host_gpu_free_mb(const int *gpus, int n) {
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return 0;
    int (*init)(void), (*shutdown)(void), (*handle)(unsigned, void **);
    int (*memory)(void *, nvml_memory *);
    *(void **)&init = dlsym(lib, "nvmlInit_v2");
    *(void **)&shutdown = dlsym(lib, "nvmlShutdown");
    *(void **)&handle = dlsym(lib, "nvmlDeviceGetHandleByIndex_v2");
    *(void **)&memory = dlsym(lib, "nvmlDeviceGetMemoryInfo");
    long least = 0;
    if (init && shutdown && handle && memory && init() == 0) {
        for (int i = 0; i < n; i++) {
            void *dev;
            nvml_memory m = {0, 0, 0};
            if (handle((unsigned)gpus[i], &dev) != 0 || memory(dev, &m) != 0) {
                least = 0;
                break;
            }
            long mb = (long)(m.free >> 20);
            least = i == 0 || mb < least ? mb : least;
        }
        shutdown();
    }
    dlclose(lib);
    return least;
}
