/* pk_gpu_slots: all-or-nothing allocation of W of N slots (GPUs, or host run slots), FIFO by
 * arrival with bounded backfill; a slot may hold several jobs at once (co-residency).
 *
 * Capacity: a slot holds at most per_slot jobs (1: exclusive, the default) and, when mem_cap
 * is set, jobs whose memory (per slot, in the caller's unit) adds up to at most mem_cap; a
 * job larger than mem_cap runs alone on its slots. A request for W slots with memory m is
 * granted only when W slots can each take it at once, so nothing ever holds a partial set and
 * jobs of different widths cannot deadlock; it gets the W least loaded of them (fewest jobs,
 * then lowest index), reported in ascending order.
 *
 * Policy: requests are kept in arrival order. When the oldest waiting request does not fit, a
 * later one that fits may go ahead (backfill, so small jobs do not leave GPUs idle behind a
 * wide head), but every request counts how often it was passed over; after max_bypass it
 * holds a reservation: no request behind it is granted until it is, and since running jobs
 * only release capacity, it gets it. So every request waits for at most max_bypass later
 * grants plus the jobs already running: no starvation. Pure data structure, no threads, no
 * clocks. */
#ifndef PK_GPU_SLOTS_H
#define PK_GPU_SLOTS_H

#include <stddef.h>
#include <stdint.h>

#include "pk_common.h"

#define PK_GPU_SLOTS_MAX 64

typedef struct pk_slot_request {
    uint64_t order; /* arrival key: smaller goes first */
    void *item;     /* the caller's job */
    int width;
    int bypassed;   /* later requests granted while this one waited */
    uint64_t mem;   /* on each of its slots */
    uint64_t avoid; /* slots (bit i: slot i) not to use while enough others are enabled */
} pk_slot_request;

typedef struct pk_gpu_slots {
    int n_slots;
    int max_bypass;
    int per_slot;     /* jobs a slot holds at once */
    uint64_t mem_cap; /* per slot; 0: memory is not counted */
    int n_free;       /* slots holding no job */
    int load[PK_GPU_SLOTS_MAX];
    int disabled[PK_GPU_SLOTS_MAX]; /* taken out of the pool: never granted again */
    int n_enabled;
    uint64_t mem[PK_GPU_SLOTS_MAX];
    pk_slot_request *queue; /* sorted by order */
    size_t n_queued;
    size_t cap;
    uint64_t granted;
    uint64_t backfilled; /* grants that went ahead of an older request */
} pk_gpu_slots;

/* Exclusive slots (per_slot 1, memory not counted) until pk_gpu_slots_set_capacity. */
int pk_gpu_slots_init(pk_gpu_slots *s, int n_slots, int max_bypass, pk_error *err);
/* per_slot >= 1 jobs at once per slot, mem_cap per slot (0: not counted). Before any grant. */
int pk_gpu_slots_set_capacity(pk_gpu_slots *s, int per_slot, uint64_t mem_cap, pk_error *err);
void pk_gpu_slots_destroy(pk_gpu_slots *s);
/* Queues a request for width slots, needing mem on each; PK_ERR_INVALID when width is not in
 * 1..n_slots. pk_gpu_slots_request: mem 0. */
int pk_gpu_slots_request_mem(pk_gpu_slots *s, uint64_t order, void *item, int width, uint64_t mem,
                             pk_error *err);
int pk_gpu_slots_request(pk_gpu_slots *s, uint64_t order, void *item, int width, pk_error *err);
/* The same, kept off the slots in avoid (a retry after an infra_error there) while at least
 * width enabled slots are outside it; otherwise avoid is ignored. PK_ERR_INFRA when fewer
 * than width slots are enabled. */
int pk_gpu_slots_request_avoid(pk_gpu_slots *s, uint64_t order, void *item, int width, uint64_t mem,
                               uint64_t avoid, pk_error *err);
/* Takes slot out of the pool (a GPU that keeps failing): it is never granted again; jobs on
 * it now finish. Requests that no longer fit come out through pk_gpu_slots_pop_unfit. */
void pk_gpu_slots_disable(pk_gpu_slots *s, int slot);
/* Removes a waiting request wider than the enabled slots; 0 when none. */
int pk_gpu_slots_pop_unfit(pk_gpu_slots *s, void **item);
/* Grants the next request that may go: returns 1 and fills item and slots[0..width-1]
 * (slot indices, ascending), or 0 when none may go now. */
int pk_gpu_slots_grant(pk_gpu_slots *s, void **item, int *slots, int *width);
/* Takes width slots with room for mem outside the queue (a pre-grant), but only when no
 * request waits: returns 1 and fills slots, or 0 (a waiting request, or no room). */
int pk_gpu_slots_take_idle_mem(pk_gpu_slots *s, int width, uint64_t mem, int *slots);
int pk_gpu_slots_take_idle(pk_gpu_slots *s, int width, int *slots);
/* Gives back what a grant of width slots with mem took (pk_gpu_slots_release: mem 0). */
void pk_gpu_slots_release_mem(pk_gpu_slots *s, const int *slots, int width, uint64_t mem);
void pk_gpu_slots_release(pk_gpu_slots *s, const int *slots, int width);
/* Removes the oldest waiting request without granting it (cancellation); 0 when empty. */
int pk_gpu_slots_pop_waiting(pk_gpu_slots *s, void **item);

#endif
