/* pk_host_info: what the baseline cache key needs to know about this machine: the GPU model,
 * the driver version and the NCCL version, read without linking CUDA. */
#ifndef PK_HOST_INFO_H
#define PK_HOST_INFO_H

typedef struct pk_host_info {
    char gpu_model[128]; /* of the first GPU in /proc/driver/nvidia/gpus, or "none" */
    char driver[64];     /* /proc/driver/nvidia/version, or "none" */
    char nccl[32];       /* ncclGetVersion() of libnccl.so.2 if it loads, or "unknown" */
    char cpu_model[128]; /* /proc/cpuinfo "model name" (the device of host problems) */
} pk_host_info;

void pk_host_info_read(pk_host_info *out);
/* The smallest free device memory (MiB) among GPUs gpus[0..n) (NVML indices), read through
 * NVML loaded at run time; 0 when NVML or a GPU is missing. */
long pk_host_gpu_free_mb(const int *gpus, int n);

#endif
