/* The host's NVIDIA GPUs as the driver lists them: each GPU's PCI bus id, the minor number of
 * its device node (/dev/nvidia<minor>) and its UUID, read from the driver's procfs
 * (/proc/driver/nvidia/gpus/<bus id>/information). A GPU is named everywhere in pkgym by its
 * index in PCI bus order (CUDA_DEVICE_ORDER=PCI_BUS_ID, NVML and nvidia-smi number them so);
 * its node is named by the minor, which need not follow that order. */
#ifndef PK_GPU_NODES_H
#define PK_GPU_NODES_H

#include "pk_common.h"

#ifdef __cplusplus
extern "C" {
#endif

#define PK_GPU_NODES_MAX 64

typedef struct pk_gpu_node {
    char bus_id[32]; /* "0000:18:00.0", lower case */
    int minor;       /* N of /dev/nvidiaN; -1 when the driver did not say */
    char uuid[96];   /* "GPU-..."; "" when the driver did not say */
} pk_gpu_node;

typedef struct pk_gpu_nodes {
    int n;                             /* GPUs the driver lists */
    pk_gpu_node gpu[PK_GPU_NODES_MAX]; /* in PCI bus order: gpu[i] is GPU index i */
} pk_gpu_nodes;

/* The driver's procfs directory: PKGYM_DRIVER_PROC when set (tests stand in fake driver data
 * there), else /proc/driver/nvidia. */
const char *pk_gpu_driver_root(void);

/* Reads the GPUs under root (NULL: pk_gpu_driver_root()). A root without a gpus/ directory
 * (no driver) is PK_ERR_NOT_FOUND; a GPU whose information file is missing or unreadable is
 * kept with minor -1 and no UUID (using it is an error, pk_gpu_nodes_lookup). */
int pk_gpu_nodes_read(const char *root, pk_gpu_nodes *out, pk_error *err);

/* The node of GPU index `index`, or NULL with err set: no such GPU, or its minor unknown. */
const pk_gpu_node *pk_gpu_nodes_lookup(const pk_gpu_nodes *m, int index, pk_error *err);

/* CUDA_VISIBLE_DEVICES's value for GPUs `indices` (in rank order) in a process that can open
 * only their nodes: their UUIDs, which name a GPU whichever GPUs CUDA enumerates; when the
 * driver gives no UUID for one of them, their positions among the job's GPUs in PCI bus order
 * (what CUDA enumerates when only those nodes exist). Returns PK_OK or an error (bad index,
 * value longer than cap). */
int pk_gpu_nodes_visible(const pk_gpu_nodes *m, const int *indices, int n, char *out, size_t cap,
                         pk_error *err);

#ifdef __cplusplus
}
#endif
#endif
