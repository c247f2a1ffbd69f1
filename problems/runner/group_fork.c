/* Harness-side rank group for launcher "fork": the runner forks the ranks itself; they meet in
 * a MAP_SHARED region created before fork (process-shared barrier plus one slot per rank). */
#include "pk_runner.h"

#include <pthread.h>
#include <semaphore.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rn_gpu_lock.h"

#define SLOT_BYTES (64 * 1024)

typedef struct shm_region {
    pthread_barrier_t barrier;
    /* The exit hold: rank 0 posts `done` once it holds no lock; the supervisor then takes the
     * locks shared and joins `exit_gate` (world + 1), so the ranks' exits (the driver freeing
     * contexts and memory) happen under the locks, out of other jobs' timing. */
    sem_t done;
    pthread_barrier_t exit_gate;
    unsigned char slots[PK_MAX_RANKS][SLOT_BYTES];
} shm_region;

static int shm_barrier(rn_group *g) {
    int rc = pthread_barrier_wait(&((shm_region *)g->impl)->barrier);
    return rc == 0 || rc == PTHREAD_BARRIER_SERIAL_THREAD ? 0 : -1;
}

static int shm_allgather(rn_group *g, const void *mine, void *all, size_t bytes) {
    shm_region *r = g->impl;
    if (bytes > SLOT_BYTES)
        return -1;
    memcpy(r->slots[g->rank], mine, bytes);
    if (shm_barrier(g))
        return -1;
    for (int i = 0; i < g->world; i++)
        memcpy((unsigned char *)all + (size_t)i * bytes, r->slots[i], bytes);
    return shm_barrier(g); /* nobody overwrites a slot before everyone has read it */
}

int rn_group_fork_init(rn_group *g, int world, pid_t *children) {
    shm_region *r =
        mmap(NULL, sizeof *r, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (r == MAP_FAILED)
        return -1;
    pthread_barrierattr_t attr;
    pthread_barrierattr_init(&attr);
    pthread_barrierattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    int rc = pthread_barrier_init(&r->barrier, &attr, (unsigned)world);
    if (!rc)
        rc = pthread_barrier_init(&r->exit_gate, &attr, (unsigned)world + 1);
    pthread_barrierattr_destroy(&attr);
    if (rc || sem_init(&r->done, 1, 0))
        return -1;
    g->world = world;
    g->barrier = shm_barrier;
    g->allgather = shm_allgather;
    g->impl = r;
    for (int i = 0; i < world; i++) {
        pid_t pid = fork();
        if (pid < 0)
            return -1;
        if (pid == 0) {
            g->rank = i;
            return 0;
        }
        children[i] = pid;
    }
    return 1;
}

int rn_group_broadcast(rn_group *g, void *buf, size_t bytes, int root) {
    unsigned char all[PK_MAX_RANKS * 256];
    if (bytes > 256)
        return -1;
    if (g->allgather(g, buf, all, bytes))
        return -1;
    memcpy(buf, all + (size_t)root * bytes, bytes);
    return 0;
}

void rn_group_fork_exit_gate(rn_group *g) {
    shm_region *r = g->impl;
    if (g->rank == 0)
        sem_post(&r->done);
    pthread_barrier_wait(&r->exit_gate);
}

/* Another job's timing may hold the GPUs for long (up to its budget): past this the ranks exit
 * without the locks rather than let this job's run limit pay for the wait. */
#define RN_EXIT_HOLD_WAIT_MS 2000

typedef struct exit_hold {
    shm_region *r;
    const rn_opts *o;
    rn_gpu_locks locks;
} exit_hold;

/* The supervisor's thread: waits for rank 0 to be through with the locks, takes them shared
 * and opens the gate. The locks go with the process (flock), after every rank was reaped. */
static void *hold_for_exit(void *arg) {
    exit_hold *h = arg;
    char err[300];
    while (sem_wait(&h->r->done) != 0)
        ;
    if (rn_gpu_locks_open(&h->locks, h->o->lock_dir, h->o->lock_ids, h->o->n_lock_ids, NULL, err,
                          sizeof err) == 0)
        rn_gpu_locks_try_shared(&h->locks, RN_EXIT_HOLD_WAIT_MS);
    pthread_barrier_wait(&h->r->exit_gate); /* held or not: the ranks must not wait forever */
    return NULL;
}

int rn_group_fork_hold_exit(rn_group *g, const rn_opts *o) {
    static exit_hold h;
    h.r = g->impl;
    h.o = o;
    pthread_t t;
    if (pthread_create(&t, NULL, hold_for_exit, &h))
        return -1;
    pthread_detach(t);
    return 0;
}
