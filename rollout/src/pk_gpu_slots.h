/* pk_gpu_slots: all-or-nothing allocation of W of N interchangeable slots (GPUs, or host run
 * slots), FIFO by arrival with bounded backfill.
 *
 * Policy: requests are kept in arrival order. A request is granted only when all W slots it
 * needs are free at once, so nothing ever holds a partial set and jobs of different widths
 * cannot deadlock. When the oldest waiting request does not fit, a later one that fits may
 * go ahead (backfill, so small jobs do not leave GPUs idle behind a wide head), but every
 * request counts how often it was passed over; after max_bypass it holds a reservation: no
 * request behind it is granted until it is, and since running jobs only release slots, it
 * gets them. So every request waits for at most max_bypass later grants plus the jobs
 * already running: no starvation. Pure data structure, no threads, no clocks. */
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
    int bypassed; /* later requests granted while this one waited */
} pk_slot_request;

typedef struct pk_gpu_slots {
    int n_slots;
    int max_bypass;
    int n_free;
    unsigned char busy[PK_GPU_SLOTS_MAX];
    pk_slot_request *queue; /* sorted by order */
    size_t n_queued;
    size_t cap;
    uint64_t granted;
    uint64_t backfilled; /* grants that went ahead of an older request */
} pk_gpu_slots;

int pk_gpu_slots_init(pk_gpu_slots *s, int n_slots, int max_bypass, pk_error *err);
void pk_gpu_slots_destroy(pk_gpu_slots *s);
/* Queues a request for width slots; PK_ERR_INVALID when width is not in 1..n_slots. */
int pk_gpu_slots_request(pk_gpu_slots *s, uint64_t order, void *item, int width, pk_error *err);
/* Grants the next request that may go: returns 1 and fills item and slots[0..width-1]
 * (slot indices, ascending), or 0 when none may go now. */
int pk_gpu_slots_grant(pk_gpu_slots *s, void **item, int *slots, int *width);
/* Takes width free slots outside the queue (a pre-grant), but only when no request waits:
 * returns 1 and fills slots, or 0 (a waiting request, or fewer than width slots free). */
int pk_gpu_slots_take_idle(pk_gpu_slots *s, int width, int *slots);
void pk_gpu_slots_release(pk_gpu_slots *s, const int *slots, int width);
/* Removes the oldest waiting request without granting it (cancellation); 0 when empty. */
int pk_gpu_slots_pop_waiting(pk_gpu_slots *s, void **item);

#endif
