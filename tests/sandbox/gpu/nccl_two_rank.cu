/* Two ranks, one process and one GPU each, bootstrapped through a pipe (no MPI): an all-reduce
 * across both GPUs, checked on the host. With --deadlock, rank 1 skips the all-reduce and waits
 * forever, so rank 0 hangs in it: the sandbox must end the job at its wall limit. */
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHECK_CUDA(x)                                                                              \
    do {                                                                                           \
        cudaError_t e_ = (x);                                                                      \
        if (e_ != cudaSuccess) {                                                                   \
            fprintf(stderr, "rank %d: %s: %s\n", rank, #x, cudaGetErrorString(e_));                \
            exit(2);                                                                               \
        }                                                                                          \
    } while (0)
#define CHECK_NCCL(x)                                                                              \
    do {                                                                                           \
        ncclResult_t r_ = (x);                                                                     \
        if (r_ != ncclSuccess) {                                                                   \
            fprintf(stderr, "rank %d: %s: %s\n", rank, #x, ncclGetErrorString(r_));                \
            exit(2);                                                                               \
        }                                                                                          \
    } while (0)

static const size_t kCount = 1 << 22; /* 16 MiB of floats */

static int run_rank(int rank, int id_fd, int deadlock) {
    ncclUniqueId id;
    if (rank == 0) {
        CHECK_NCCL(ncclGetUniqueId(&id));
        if (write(id_fd, &id, sizeof id) != (ssize_t)sizeof id)
            return 2;
    } else if (read(id_fd, &id, sizeof id) != (ssize_t)sizeof id) {
        fprintf(stderr, "rank 1: no NCCL id from rank 0\n");
        return 2;
    }
    CHECK_CUDA(cudaSetDevice(rank));
    ncclComm_t comm;
    CHECK_NCCL(ncclCommInitRank(&comm, 2, id, rank));
    float *buf = NULL;
    CHECK_CUDA(cudaMalloc(&buf, kCount * sizeof(float)));
    float *host = (float *)malloc(kCount * sizeof(float));
    for (size_t i = 0; i < kCount; i++)
        host[i] = (float)(rank + 1);
    CHECK_CUDA(cudaMemcpy(buf, host, kCount * sizeof(float), cudaMemcpyHostToDevice));
    if (deadlock && rank == 1) {
        printf("rank 1: skipping the all-reduce; rank 0 will wait forever\n");
        fflush(stdout);
        for (;;)
            pause();
    }
    cudaStream_t stream;
    CHECK_CUDA(cudaStreamCreate(&stream));
    CHECK_NCCL(ncclAllReduce(buf, buf, kCount, ncclFloat, ncclSum, comm, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    CHECK_CUDA(cudaMemcpy(host, buf, kCount * sizeof(float), cudaMemcpyDeviceToHost));
    size_t bad = 0;
    for (size_t i = 0; i < kCount; i++)
        bad += host[i] != 3.0f;
    printf("rank %d: all-reduce of %zu floats: %zu wrong\n", rank, kCount, bad);
    CHECK_NCCL(ncclCommDestroy(comm));
    CHECK_CUDA(cudaFree(buf));
    free(host);
    return bad ? 1 : 0;
}

int main(int argc, char **argv) {
    int deadlock = argc > 1 && strcmp(argv[1], "--deadlock") == 0;
    int fds[2];
    if (pipe(fds))
        return 2;
    pid_t pids[2];
    for (int rank = 0; rank < 2; rank++) {
        pids[rank] = fork();
        if (pids[rank] == 0) {
            close(rank == 0 ? fds[0] : fds[1]);
            _exit(run_rank(rank, rank == 0 ? fds[1] : fds[0], deadlock));
        }
    }
    close(fds[0]);
    close(fds[1]);
    int failed = 0;
    for (int rank = 0; rank < 2; rank++) {
        int st = 0;
        waitpid(pids[rank], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "rank %d ended with wait status 0x%x\n", rank, st);
            failed = 1;
        }
    }
    return failed;
}
