// Where a GPU job's start-up goes: one process per rank (forked before any CUDA call, as
// pk-runner's fork launcher does), timing each step of what the runner does before the first
// candidate call. Environment variables pass through to CUDA and NCCL, so variants
// (NCCL_RUNTIME_CONNECT, CUDA_MODULE_LOADING, NCCL_TOPO_FILE, ...) are measured by rerunning.
//
// PROBE_OWN_GPU=1: each rank process sees only its own GPU (CUDA_VISIBLE_DEVICES set to the
// rank's entry of the inherited list, or to the rank, before any CUDA call; then device 0), as
// pk-runner --rank-visibility own does (issue 30, lever 1). PROBE_NO_DEV_COMM=1: no
// ncclDevCommCreate (a problem without "device_api").
//
//   nvcc -O2 -arch=sm_90a -o init_probe init_probe.cu -lnccl && ./init_probe 2 [arena_mib]
#include <cuda_runtime.h>
#include <nccl.h>
#include <nccl_device.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

struct shared {
    ncclUniqueId id;
    volatile int id_ready;
    double t[8][8];
};

static const char *steps[] = {"cuda context",
                              "nccl comm init",
                              "arena alloc+register",
                              "dev comm create",
                              "first allreduce",
                              "comm+arena teardown",
                              "total"};

int main(int argc, char **argv) {
    int world = argc > 1 ? atoi(argv[1]) : 2;
    size_t arena = (argc > 2 ? strtoull(argv[2], NULL, 0) : 512) << 20;
    struct shared *sh = (struct shared *)mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE,
                                              MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    memset(sh, 0, sizeof *sh);
    double start = now_ms();
    for (int r = 0; r < world; r++) {
        if (fork() != 0)
            continue;
        double t0 = now_ms(), t;
        int dev_index = r;
        if (getenv("PROBE_OWN_GPU")) {
            char own[128] = "";
            const char *list = getenv("CUDA_VISIBLE_DEVICES");
            if (list && *list) {
                const char *p = list;
                for (int i = 0; i < r && p; i++)
                    p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL;
                if (!p)
                    _exit(3);
                snprintf(own, sizeof own, "%.*s", (int)strcspn(p, ","), p);
            } else {
                snprintf(own, sizeof own, "%d", r);
            }
            setenv("CUDA_VISIBLE_DEVICES", own, 1);
            dev_index = 0;
        }
        cudaSetDevice(dev_index);
        cudaFree(0);
        t = now_ms();
        sh->t[r][0] = t - t0;
        if (r == 0) {
            ncclGetUniqueId(&sh->id);
            __sync_synchronize();
            sh->id_ready = 1;
        }
        while (!sh->id_ready)
            usleep(100);
        ncclComm_t comm;
        double t1 = now_ms();
        if (ncclCommInitRank(&comm, world, sh->id, r) != ncclSuccess)
            _exit(2);
        sh->t[r][1] = now_ms() - t1;
        t1 = now_ms();
        void *buf;
        ncclWindow_t win;
        ncclMemAlloc(&buf, arena);
        ncclCommWindowRegister(comm, buf, arena, &win, NCCL_WIN_COLL_SYMMETRIC);
        sh->t[r][2] = now_ms() - t1;
        t1 = now_ms();
        ncclDevComm dev;
        ncclDevCommRequirements req;
        memset(&req, 0, sizeof req);
        req.lsaBarrierCount = 132;
        int have_dev = !getenv("PROBE_NO_DEV_COMM");
        if (have_dev)
            ncclDevCommCreate(comm, &req, &dev);
        sh->t[r][3] = now_ms() - t1;
        t1 = now_ms();
        cudaStream_t s;
        cudaStreamCreate(&s);
        ncclAllReduce(buf, buf, 1 << 20, ncclFloat, ncclSum, comm, s);
        cudaStreamSynchronize(s);
        sh->t[r][4] = now_ms() - t1;
        if (getenv("PROBE_NO_TEARDOWN")) { // leave it all to process exit and the driver
            sh->t[r][6] = now_ms() - t0;
            _exit(0);
        }
        t1 = now_ms();
        if (have_dev)
            ncclDevCommDestroy(comm, &dev);
        ncclCommWindowDeregister(comm, win);
        ncclMemFree(buf);
        ncclCommDestroy(comm);
        sh->t[r][5] = now_ms() - t1;
        sh->t[r][6] = now_ms() - t0;
        _exit(0);
    }
    int bad = 0, status;
    while (wait(&status) > 0)
        bad |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    printf("%-24s", "step (ms)");
    for (int r = 0; r < world; r++)
        printf("  rank %d", r);
    printf("\n");
    for (int k = 0; k < 7; k++) {
        printf("%-24s", steps[k]);
        for (int r = 0; r < world; r++)
            printf("  %6.1f", sh->t[r][k]);
        printf("\n");
    }
    printf("%-24s  %6.1f%s\n", "wall incl. fork+exit", now_ms() - start,
           bad ? "  (a rank failed)" : "");
    return bad;
}
