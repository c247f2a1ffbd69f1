/* The GPUs hello reports. */
#ifndef PK_ENV_GPU_LIST_H
#define PK_ENV_GPU_LIST_H

#include <jansson.h>

/* [{index, name, memory_mib}] through NVML, loaded at run time (empty array when there is
 * none). */
json_t *pk_gpu_list_json(void);

#endif
