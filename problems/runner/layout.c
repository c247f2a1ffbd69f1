/* The arena layout: rotation slots of every argument, each argument between guard zones.
 *
 * In one slot, argument i has a zone before it (from the previous argument's after-zone to
 * its 4096-aligned start) and a zone of RN_GUARD_BYTES right after its last byte, so even a
 * one-element overrun lands in a zone, not in alignment padding. */
#include "pk_runner.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define ALIGN 4096

static size_t align_up(size_t x) {
    return (x + ALIGN - 1) / ALIGN * ALIGN;
}

static void add_zone(rn_layout *l, size_t lo, size_t hi, int arg, int after) {
    if (hi > lo && l->n_zones < RN_MAX_ZONES)
        l->zones[l->n_zones++] = (rn_zone){lo, hi, arg, after};
}

int rn_layout_make(const pk_problem *p, const pk_problem_sizes *sz, size_t l2_bytes,
                   rn_layout *out) {
    memset(out, 0, sizeof *out);
    size_t cursor = 0;
    for (int i = 0; i < p->n_args; i++) {
        out->arg_bytes[i] = sz->counts[i] * pk_dtype_size(p->args[i].dtype);
        out->arg_off[i] = align_up(cursor + RN_GUARD_BYTES);
        cursor = out->arg_off[i] + out->arg_bytes[i] + RN_GUARD_BYTES;
    }
    out->set_bytes = align_up(cursor);
    /* Enough rotating copies of the argument set to exceed l2_multiple x L2 (GPU). */
    int copies = RN_MIN_COPIES;
    if (l2_bytes && out->set_bytes) {
        double need = p->l2_multiple * (double)l2_bytes / (double)out->set_bytes;
        if (need > copies)
            copies = need > RN_MAX_COPIES ? RN_MAX_COPIES : (int)ceil(need);
    }
    out->copies = copies;
    for (int s = 0; s < copies; s++) {
        size_t base = (size_t)s * out->set_bytes, prev_end = base;
        for (int i = 0; i < p->n_args; i++) {
            size_t start = base + out->arg_off[i], end = start + out->arg_bytes[i];
            add_zone(out, prev_end, start, i, 0);
            size_t after_end = i + 1 < p->n_args ? end + RN_GUARD_BYTES : base + out->set_bytes;
            add_zone(out, end, after_end, i, 1);
            prev_end = after_end;
        }
    }
    size_t slots_end = (size_t)copies * out->set_bytes;
    out->scratch_bytes = align_up((size_t)p->scratch_bytes);
    out->scratch_off = align_up(slots_end + RN_GUARD_BYTES);
    out->arena_bytes = align_up(out->scratch_off + out->scratch_bytes + RN_GUARD_BYTES);
    add_zone(out, slots_end, out->scratch_off, -1, 0);
    add_zone(out, out->scratch_off + out->scratch_bytes, out->arena_bytes, -1, 1);
    return out->n_zones < RN_MAX_ZONES ? 0 : -1;
}

void rn_guard_describe(const pk_problem *p, const rn_layout *lay, const rn_guard_hit *hit, int rank,
                       char *out, size_t cap) {
    const rn_zone *z = &lay->zones[hit->zone];
    char what[64];
    if (z->arg < 0)
        snprintf(what, sizeof what, "the scratch buffer");
    else
        snprintf(what, sizeof what, "%s %s",
                 p->args[z->arg].role == PK_ARG_INPUT ? "input" : "output", p->args[z->arg].name);
    if (z->after)
        snprintf(out, cap,
                 "rank %d: %llu byte(s) written past the end of %s (from byte +%llu to +%llu "
                 "after its end)",
                 rank, (unsigned long long)hit->bytes, what, (unsigned long long)hit->first,
                 (unsigned long long)hit->last);
    else
        snprintf(out, cap,
                 "rank %d: %llu byte(s) written before the start of %s (from byte -%llu to "
                 "-%llu before its start)",
                 rank, (unsigned long long)hit->bytes, what,
                 (unsigned long long)(z->hi - z->lo - hit->last),
                 (unsigned long long)(z->hi - z->lo - hit->first));
}
