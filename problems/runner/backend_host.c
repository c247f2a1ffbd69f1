/* Host backend (selftest problems): buffers in host memory, loops, wall-clock timing. */
#include "pk_runner.h"
#include "rn_elem.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *host_alloc(rn_backend *b, size_t bytes) {
    (void)b;
    void *p = NULL;
    return posix_memalign(&p, 4096, bytes ? bytes : 1) == 0 ? p : NULL;
}

static void host_free(rn_backend *b, void *p) {
    (void)b;
    free(p);
}

static int host_generate(rn_backend *b, void *p, pk_dtype t, size_t count, uint64_t key,
                         const rn_gen *gen) {
    (void)b;
    const int integer =
        t == PK_DTYPE_I32 || t == PK_DTYPE_I64 || t == PK_DTYPE_I8 || t == PK_DTYPE_U8;
    for (size_t i = 0; i < count; i++)
        rn_store(p, t, i, rn_gen_value(gen, integer, key, i));
    return 0;
}

static int host_sample_positions(rn_backend *b, uint64_t *pos, uint64_t key, size_t count,
                                 size_t n) {
    (void)b;
    for (size_t k = 0; k < n; k++)
        pos[k] = rn_sample_pos(key, count, n, k);
    return 0;
}

static int host_gather(rn_backend *b, void *dst, const void *src, size_t es, const uint64_t *pos,
                       size_t n) {
    (void)b;
    for (size_t k = 0; k < n; k++)
        memcpy((char *)dst + k * es, (const char *)src + pos[k] * es, es);
    return 0;
}

static int host_fill_guards(rn_backend *b, void *base, const rn_zone *z, int n, uint64_t seed) {
    (void)b;
    for (int i = 0; i < n; i++)
        for (uint64_t o = z[i].lo; o < z[i].hi; o++)
            ((uint8_t *)base)[o] = rn_guard_byte(seed, o);
    return 0;
}

static int host_check_guards(rn_backend *b, const void *base, const rn_zone *z, int n,
                             uint64_t seed, rn_guard_hit *hit) {
    (void)b;
    hit->zone = -1;
    for (int i = 0; i < n && hit->zone < 0; i++)
        for (uint64_t o = z[i].lo; o < z[i].hi; o++) {
            if (((const uint8_t *)base)[o] == rn_guard_byte(seed, o))
                continue;
            if (hit->zone < 0)
                *hit = (rn_guard_hit){i, 0, o - z[i].lo, 0};
            hit->bytes++;
            hit->last = o - z[i].lo;
        }
    return 0;
}

static int host_flush_l2(rn_backend *b) {
    (void)b;
    return 0;
}

static void host_use_timed_stream(rn_backend *b, int on) {
    (void)b;
    (void)on; /* one thread, no streams */
}

static int host_poison(rn_backend *b, void *p, pk_dtype t, size_t count) {
    (void)b;
    for (size_t i = 0; i < count; i++)
        rn_poison(p, t, i);
    return 0;
}

static int host_copy(rn_backend *b, void *dst, const void *src, size_t bytes) {
    (void)b;
    memcpy(dst, src, bytes);
    return 0;
}

static int host_equal(rn_backend *b, const void *x, const void *y, size_t bytes, int *eq) {
    (void)b;
    *eq = memcmp(x, y, bytes) == 0;
    return 0;
}

static int host_compare(rn_backend *b, const void *got, const void *want, pk_dtype t, size_t count,
                        double atol, double rtol, rn_compare *out) {
    (void)b;
    memset(out, 0, sizeof *out);
    out->bad_index = -1;
    for (size_t i = 0; i < count; i++) {
        double g = rn_load(got, (int)t, i), w = rn_load(want, (int)t, i);
        if (rtol == 0 || rtol * fabs(w) >= atol || isnan(w)) { /* the norm-wise part */
            out->err_sq += isnan(g) || isnan(w) ? INFINITY : (g - w) * (g - w);
            out->want_sq += isnan(w) ? 0.0 : w * w;
        }
        double abs_err = fabs(g - w), rel_err = w != 0 ? abs_err / fabs(w) : abs_err;
        int nan_seen = isnan(g) || isnan(w);
        int ok = !nan_seen && abs_err <= atol + rtol * fabs(w);
        if (nan_seen)
            abs_err = rel_err = INFINITY;
        if (abs_err > out->max_abs)
            out->max_abs = abs_err;
        if (rel_err > out->max_rel)
            out->max_rel = rel_err;
        if (ok)
            continue;
        out->n_bad++;
        uint64_t ulp = nan_seen ? ~0ULL : rn_ulp_distance(got, want, (int)t, i);
        if (ulp > out->max_ulp)
            out->max_ulp = ulp;
        if (out->bad_index < 0) {
            out->bad_index = (long long)i;
            out->expected = w;
            out->got = g;
        }
    }
    return 0;
}

static int host_rms(rn_backend *b, const void *p, pk_dtype t, size_t count, double *out) {
    (void)b;
    double sum = 0;
    for (size_t i = 0; i < count; i++) {
        double v = rn_load(p, (int)t, i);
        sum += v == v ? v * v : 0.0;
    }
    *out = count ? sqrt(sum / (double)count) : 0;
    return 0;
}

static int host_to_host(rn_backend *b, void *host, const void *src, size_t bytes) {
    (void)b;
    memcpy(host, src, bytes);
    return 0;
}

static int host_sync(rn_backend *b) {
    (void)b;
    return 0;
}

static int host_time_calls(rn_backend *b, int (*call)(void *arg, int i),
                           int (*epilogue)(void *arg, int i), void *arg, int iters, double *us,
                           double *host_total_us, double *stream_total_us) {
    double start = pk_now_us();
    for (int i = 0; i < iters; i++) {
        double t0 = pk_now_us();
        int rc = call(arg, i);
        us[i] = pk_now_us() - t0;
        if (rc) {
            snprintf(b->error, sizeof b->error, "call returned %d during timing", rc);
            return -1;
        }
        if (epilogue(arg, i)) {
            snprintf(b->error, sizeof b->error, "the harness's epilogue failed after call %d", i);
            return -1;
        }
    }
    *host_total_us = *stream_total_us = pk_now_us() - start;
    return 0;
}

static int host_setup_arena(rn_backend *b, pk_ctx *ctx, size_t bytes) {
    ctx->sym_base = host_alloc(b, bytes);
    if (!ctx->sym_base)
        return -1;
    memset(ctx->sym_base, 0, bytes);
    ctx->sym_size = bytes;
    for (int i = 0; i < PK_MAX_RANKS; i++)
        ctx->peer_base[i] = NULL; /* host ranks share nothing; they talk through MPI */
    ctx->peer_base[ctx->rank] = ctx->sym_base;
    return 0;
}

static void host_fini(rn_backend *b, pk_ctx *ctx) {
    host_free(b, ctx->sym_base);
    ctx->sym_base = NULL;
}

int rn_backend_host_init(rn_backend *b, pk_ctx *ctx) {
    memset(b, 0, sizeof *b);
    strcpy(b->name, "host");
    b->alloc_private = host_alloc;
    b->free_private = host_free;
    b->generate = host_generate;
    b->poison = host_poison;
    b->copy = host_copy;
    b->equal = host_equal;
    b->compare = host_compare;
    b->sync = host_sync;
    b->time_calls = host_time_calls;
    b->sample_positions = host_sample_positions;
    b->gather = host_gather;
    b->fill_guards = host_fill_guards;
    b->check_guards = host_check_guards;
    b->flush_l2 = host_flush_l2;
    b->use_timed_stream = host_use_timed_stream;
    b->setup_arena = host_setup_arena;
    b->to_host = host_to_host;
    b->rms = host_rms;
    b->fini = host_fini;
    b->l2_bytes = 0;
    ctx->device = -1;
    ctx->stream = NULL;
    ctx->comm = NULL;
    return 0;
}
