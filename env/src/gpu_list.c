/* The GPU list for hello, read through NVML loaded at run time, so the server starts (and
 * reports no GPUs) on machines without the NVIDIA driver. */
#include <dlfcn.h>
#include <stdio.h>

#include "gpu_list.h"

typedef struct nvml_memory {
    unsigned long long total, free, used;
} nvml_memory;

typedef int (*nvml_init_fn)(void);
typedef int (*nvml_count_fn)(unsigned int *);
typedef int (*nvml_handle_fn)(unsigned int, void **);
typedef int (*nvml_name_fn)(void *, char *, unsigned int);
typedef int (*nvml_memory_fn)(void *, nvml_memory *);

json_t *pk_gpu_list_json(void) {
    json_t *list = json_array();
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib)
        return list;
    nvml_init_fn init = (nvml_init_fn)dlsym(lib, "nvmlInit_v2");
    nvml_init_fn shutdown = (nvml_init_fn)dlsym(lib, "nvmlShutdown");
    nvml_count_fn count = (nvml_count_fn)dlsym(lib, "nvmlDeviceGetCount_v2");
    nvml_handle_fn handle = (nvml_handle_fn)dlsym(lib, "nvmlDeviceGetHandleByIndex_v2");
    nvml_name_fn name = (nvml_name_fn)dlsym(lib, "nvmlDeviceGetName");
    nvml_memory_fn memory = (nvml_memory_fn)dlsym(lib, "nvmlDeviceGetMemoryInfo");
    unsigned int n = 0;
    if (init && shutdown && count && handle && name && memory && init() == 0) {
        if (count(&n) == 0) {
            for (unsigned int i = 0; i < n && list; i++) {
                void *dev;
                char buf[96] = "unknown";
                nvml_memory mem = {0, 0, 0};
                if (handle(i, &dev) != 0)
                    continue;
                name(dev, buf, sizeof buf);
                memory(dev, &mem);
                json_array_append_new(list,
                                      json_pack("{s:i, s:s, s:I}", "index", (int)i, "name", buf,
                                                "memory_mib", (json_int_t)(mem.total >> 20)));
            }
        }
        shutdown();
    }
    dlclose(lib);
    return list;
}
