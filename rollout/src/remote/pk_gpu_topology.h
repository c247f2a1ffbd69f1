/* The GPUs of this host and their NVLink domains, for the worker's announcement and its GPU
 * choice. NVML (libnvidia-ml.so.1, loaded at run time) gives the GPUs and the pairwise NVLink
 * P2P status; when NVML cannot say, `nvidia-smi topo -m` is parsed; a host without the
 * driver has no GPUs. A domain is a set of GPUs connected through NVLink (directly or over
 * NVSwitch): a job of W GPUs must get all W from one domain. */
#ifndef PK_GPU_TOPOLOGY_H
#define PK_GPU_TOPOLOGY_H

#include "pk_gpu_nodes.h"

#define PK_TOPO_MAX_GPUS 64

typedef struct pk_gpu_desc {
    int index; /* position in PCI bus order (as CUDA_DEVICE_ORDER=PCI_BUS_ID numbers them): the
                  driver's (pk_gpu_nodes.h) for the GPU of this UUID, else NVML's index */
    char name[96];
    long long memory_mib;
    char uuid[96];
    int minor; /* N of its node /dev/nvidiaN, from the driver; -1 when it does not say */
} pk_gpu_desc;

typedef struct pk_gpu_topology {
    int n_gpus;
    pk_gpu_desc gpus[PK_TOPO_MAX_GPUS];
    int domain[PK_TOPO_MAX_GPUS]; /* the domain of gpus[i], 0..n_domains-1 */
    int n_domains;
    char source[16]; /* where the domains came from: "nvml", "nvidia-smi", "pcie" (no NVLink:
                        one domain), "unknown" (links not readable: one domain), "none" */
} pk_gpu_topology;

/* Reads this host's GPUs and links (never fails: no driver means no GPUs). */
void pk_gpu_topology_read(pk_gpu_topology *t);

/* Sets each GPU's index and minor from the driver's list, matched by UUID: the sandbox binds a
 * GPU's node through that list, so the index the worker announces and the scheduler grants
 * must be the driver's. GPUs the list lacks keep NVML's index and minor -1. */
void pk_gpu_topology_apply_driver(pk_gpu_topology *t, const pk_gpu_nodes *nodes);

/* Sets t's domains from its link matrix (n_gpus x n_gpus; NULL when unknown) and source:
 * the NVLink components; on a host with no NVLink at all (PCIe only), or whose links could
 * not be read, all GPUs form one domain, as a single-machine server would use them (source
 * "pcie" or "unknown"). */
void pk_gpu_topology_set_domains(pk_gpu_topology *t, const unsigned char *links,
                                 const char *source);

/* Domains from a symmetric n x n link matrix (links[i*n+j] != 0: GPUs i and j share an
 * NVLink): connected components, numbered in order of their lowest GPU. */
void pk_gpu_domains_from_links(int n, const unsigned char *links, int *domain, int *n_domains);

/* Parses `nvidia-smi topo -m` output into links (n x n, n = GPUs in the matrix, at most
 * max_n). Cells "NV<k>" are NVLinks. Returns n, or -1 when the text has no GPU matrix. */
int pk_gpu_topology_parse_smi(const char *text, unsigned char *links, int max_n);

/* Keeps only the GPUs whose indices are listed (in that order), renumbering domains. */
void pk_gpu_topology_select(pk_gpu_topology *t, const int *indices, int n);

/* The GPUs of the largest domain (ties: the lowest-numbered), as positions in t->gpus. */
int pk_gpu_topology_largest_domain(const pk_gpu_topology *t, int *positions);

#endif
