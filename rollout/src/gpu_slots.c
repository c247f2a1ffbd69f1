/* All-or-nothing slot allocation, FIFO with bounded backfill (policy in pk_gpu_slots.h). */
#include "pk_gpu_slots.h"

#include <stdlib.h>
#include <string.h>

int pk_gpu_slots_init(pk_gpu_slots *s, int n_slots, int max_bypass, pk_error *err) {
    memset(s, 0, sizeof *s);
    if (n_slots < 0 || n_slots > PK_GPU_SLOTS_MAX)
        return pk_error_set(err, PK_ERR_INVALID, "slot count %d is not in 0..%d", n_slots,
                            PK_GPU_SLOTS_MAX);
    if (max_bypass < 0)
        return pk_error_set(err, PK_ERR_INVALID, "max_bypass %d is negative", max_bypass);
    s->n_slots = n_slots;
    s->n_free = n_slots;
    s->max_bypass = max_bypass;
    return PK_OK;
}

void pk_gpu_slots_destroy(pk_gpu_slots *s) {
    free(s->queue);
    memset(s, 0, sizeof *s);
}

int pk_gpu_slots_request(pk_gpu_slots *s, uint64_t order, void *item, int width, pk_error *err) {
    if (width < 1 || width > s->n_slots)
        return pk_error_set(err, PK_ERR_INVALID, "a job needing %d slots cannot run on %d", width,
                            s->n_slots);
    if (s->n_queued == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 16;
        pk_slot_request *q = realloc(s->queue, cap * sizeof *q);
        if (!q)
            return pk_error_set(err, PK_ERR_NOMEM, "out of memory queueing a slot request");
        s->queue = q;
        s->cap = cap;
    }
    /* Insert by arrival order: a job that compiled late keeps its place. */
    size_t at = s->n_queued;
    while (at > 0 && s->queue[at - 1].order > order)
        at--;
    memmove(&s->queue[at + 1], &s->queue[at], (s->n_queued - at) * sizeof *s->queue);
    s->queue[at] = (pk_slot_request){.order = order, .item = item, .width = width};
    s->n_queued++;
    return PK_OK;
}

static void take_slots(pk_gpu_slots *s, int width, int *slots) {
    int got = 0;
    for (int i = 0; i < s->n_slots && got < width; i++) {
        if (!s->busy[i]) {
            s->busy[i] = 1;
            slots[got++] = i;
        }
    }
    s->n_free -= width;
}

int pk_gpu_slots_take_idle(pk_gpu_slots *s, int width, int *slots) {
    if (s->n_queued > 0 || width < 1 || width > s->n_free)
        return 0;
    take_slots(s, width, slots);
    s->granted++;
    return 1;
}

int pk_gpu_slots_grant(pk_gpu_slots *s, void **item, int *slots, int *width) {
    for (size_t i = 0; i < s->n_queued; i++) {
        pk_slot_request *r = &s->queue[i];
        if (r->width > s->n_free) {
            if (r->bypassed >= s->max_bypass)
                return 0; /* reserved: nothing behind it may go */
            continue;
        }
        for (size_t j = 0; j < i; j++)
            s->queue[j].bypassed++;
        if (i > 0)
            s->backfilled++;
        *item = r->item;
        *width = r->width;
        take_slots(s, r->width, slots);
        memmove(&s->queue[i], &s->queue[i + 1], (s->n_queued - i - 1) * sizeof *s->queue);
        s->n_queued--;
        s->granted++;
        return 1;
    }
    return 0;
}

void pk_gpu_slots_release(pk_gpu_slots *s, const int *slots, int width) {
    for (int i = 0; i < width; i++) {
        int k = slots[i];
        if (k >= 0 && k < s->n_slots && s->busy[k]) {
            s->busy[k] = 0;
            s->n_free++;
        }
    }
}

int pk_gpu_slots_pop_waiting(pk_gpu_slots *s, void **item) {
    if (s->n_queued == 0)
        return 0;
    *item = s->queue[0].item;
    memmove(&s->queue[0], &s->queue[1], (s->n_queued - 1) * sizeof *s->queue);
    s->n_queued--;
    return 1;
}
