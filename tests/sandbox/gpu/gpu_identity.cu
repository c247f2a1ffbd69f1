// Prints the GPUs CUDA sees ("count N", then "dev I BUSID" each), for the GPU subset test:
// inside the sandbox, device i must be the i-th GPU the job was given.
#include <cuda_runtime.h>
#include <stdio.h>

int main(void) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        printf("error %s\n", cudaGetErrorString(e));
        return 1;
    }
    printf("count %d\n", n);
    for (int i = 0; i < n; i++) {
        char bus[64] = "";
        void *p = NULL;
        if (cudaSetDevice(i) != cudaSuccess || cudaMalloc(&p, 1 << 20) != cudaSuccess ||
            cudaDeviceGetPCIBusId(bus, sizeof bus, i) != cudaSuccess) {
            printf("error device %d\n", i);
            return 1;
        }
        cudaFree(p);
        printf("dev %d %s\n", i, bus);
    }
    return 0;
}
