/* All-or-nothing slot allocation with co-residency, FIFO with bounded backfill (policy in
 * pk_gpu_slots.h). */
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
    s->n_enabled = n_slots;
    s->n_free = n_slots;
    s->max_bypass = max_bypass;
    s->per_slot = 1;
    return PK_OK;
}

int pk_gpu_slots_set_capacity(pk_gpu_slots *s, int per_slot, uint64_t mem_cap, pk_error *err) {
    if (per_slot < 1)
        return pk_error_set(err, PK_ERR_INVALID, "%d jobs per slot (at least 1)", per_slot);
    s->per_slot = per_slot;
    s->mem_cap = mem_cap;
    return PK_OK;
}

void pk_gpu_slots_destroy(pk_gpu_slots *s) {
    free(s->queue);
    memset(s, 0, sizeof *s);
}

int pk_gpu_slots_request_avoid(pk_gpu_slots *s, uint64_t order, void *item, int width, uint64_t mem,
                               uint64_t avoid, pk_error *err) {
    if (width < 1 || width > s->n_slots)
        return pk_error_set(err, PK_ERR_INVALID, "a job needing %d slots cannot run on %d", width,
                            s->n_slots);
    if (width > s->n_enabled)
        return pk_error_set(err, PK_ERR_INFRA,
                            "a job needing %d GPUs cannot run: %d of %d are left in the pool "
                            "(the others kept failing before any candidate code ran)",
                            width, s->n_enabled, s->n_slots);
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
    s->queue[at] =
        (pk_slot_request){.order = order, .item = item, .width = width, .mem = mem, .avoid = avoid};
    s->n_queued++;
    return PK_OK;
}

int pk_gpu_slots_request_mem(pk_gpu_slots *s, uint64_t order, void *item, int width, uint64_t mem,
                             pk_error *err) {
    return pk_gpu_slots_request_avoid(s, order, item, width, mem, 0, err);
}

void pk_gpu_slots_disable(pk_gpu_slots *s, int slot) {
    if (slot < 0 || slot >= s->n_slots || s->disabled[slot])
        return;
    s->disabled[slot] = 1;
    s->n_enabled--;
}

int pk_gpu_slots_pop_unfit(pk_gpu_slots *s, void **item) {
    for (size_t i = 0; i < s->n_queued; i++)
        if (s->queue[i].width > s->n_enabled) {
            *item = s->queue[i].item;
            memmove(&s->queue[i], &s->queue[i + 1], (s->n_queued - i - 1) * sizeof *s->queue);
            s->n_queued--;
            return 1;
        }
    return 0;
}

int pk_gpu_slots_request(pk_gpu_slots *s, uint64_t order, void *item, int width, pk_error *err) {
    return pk_gpu_slots_request_mem(s, order, item, width, 0, err);
}

/* Slot i can take one more job needing mem: below per_slot, and within mem_cap (a job larger
 * than mem_cap alone on an empty slot). */
static int room(const pk_gpu_slots *s, int i, uint64_t mem) {
    if (s->disabled[i] || s->load[i] >= s->per_slot)
        return 0;
    if (!s->mem_cap || s->mem[i] + mem <= s->mem_cap)
        return 1;
    return s->load[i] == 0 && mem > s->mem_cap;
}

/* Enabled slots outside avoid. */
static int enabled_outside(const pk_gpu_slots *s, uint64_t avoid) {
    int n = 0;
    for (int i = 0; i < s->n_slots; i++)
        n += !s->disabled[i] && !(avoid >> i & 1);
    return n;
}

/* Fills slots with the width least loaded slots that have room (ascending); 0 when fewer.
 * Slots in avoid are left out while width enabled slots are outside it. */
static int choose(const pk_gpu_slots *s, int width, uint64_t mem, uint64_t avoid, int *slots) {
    int cand[PK_GPU_SLOTS_MAX], n = 0;
    if (avoid && enabled_outside(s, avoid) < width)
        avoid = 0;
    for (int i = 0; i < s->n_slots; i++)
        if (room(s, i, mem) && !(avoid >> i & 1))
            cand[n++] = i;
    if (n < width)
        return 0;
    /* Stable selection: fewest jobs first, then the lowest index. */
    int picked[PK_GPU_SLOTS_MAX] = {0};
    for (int k = 0; k < width; k++) {
        int best = -1;
        for (int c = 0; c < n; c++)
            if (!picked[c] && (best < 0 || s->load[cand[c]] < s->load[cand[best]]))
                best = c;
        picked[best] = 1;
    }
    int got = 0;
    for (int c = 0; c < n; c++)
        if (picked[c])
            slots[got++] = cand[c];
    return 1;
}

static void take(pk_gpu_slots *s, const int *slots, int width, uint64_t mem) {
    for (int k = 0; k < width; k++) {
        int i = slots[k];
        if (s->load[i]++ == 0)
            s->n_free--;
        s->mem[i] += mem;
    }
    s->granted++;
}

int pk_gpu_slots_take_idle_mem(pk_gpu_slots *s, int width, uint64_t mem, int *slots) {
    if (s->n_queued > 0 || width < 1 || width > s->n_slots || !choose(s, width, mem, 0, slots))
        return 0;
    take(s, slots, width, mem);
    return 1;
}

int pk_gpu_slots_take_idle(pk_gpu_slots *s, int width, int *slots) {
    return pk_gpu_slots_take_idle_mem(s, width, 0, slots);
}

int pk_gpu_slots_grant(pk_gpu_slots *s, void **item, int *slots, int *width) {
    for (size_t i = 0; i < s->n_queued; i++) {
        pk_slot_request *r = &s->queue[i];
        if (!choose(s, r->width, r->mem, r->avoid, slots)) {
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
        take(s, slots, r->width, r->mem);
        memmove(&s->queue[i], &s->queue[i + 1], (s->n_queued - i - 1) * sizeof *s->queue);
        s->n_queued--;
        return 1;
    }
    return 0;
}

void pk_gpu_slots_release_mem(pk_gpu_slots *s, const int *slots, int width, uint64_t mem) {
    for (int k = 0; k < width; k++) {
        int i = slots[k];
        if (i < 0 || i >= s->n_slots || s->load[i] == 0)
            continue;
        s->mem[i] = s->mem[i] >= mem ? s->mem[i] - mem : 0;
        if (--s->load[i] == 0) {
            s->mem[i] = 0;
            s->n_free++;
        }
    }
}

void pk_gpu_slots_release(pk_gpu_slots *s, const int *slots, int width) {
    pk_gpu_slots_release_mem(s, slots, width, 0);
}

int pk_gpu_slots_pop_waiting(pk_gpu_slots *s, void **item) {
    if (s->n_queued == 0)
        return 0;
    *item = s->queue[0].item;
    memmove(&s->queue[0], &s->queue[1], (s->n_queued - 1) * sizeof *s->queue);
    s->n_queued--;
    return 1;
}
