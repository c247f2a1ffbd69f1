/* pk-cupti-trace: a CUPTI activity-tracing library the profile stage injects into the ranks of
 * its timeline run (CUDA_INJECTION64_PATH; never loaded in a timed run). It records the GPU
 * operations of one call of the candidate: pk-runner calls pk_cupti_trace_start before and
 * pk_cupti_trace_flush after it (next to cudaProfilerStart/Stop, which bracket the same call
 * for ncu), outside every CUPTI callback, and it writes one file per process,
 * $PKGYM_PROFILE_TRACE_DIR/trace.<pid>: K <device> <stream> <start_ns> <end_ns> <kernel name> C
 * <device> <stream> <start_ns> <end_ns> peer copy      (communication) M <device> <stream>
 * <start_ns> <end_ns> memcpy|memset  (other copies) parsed by problems/src/profile_trace.c. Errors
 * go to stderr as "pk-cupti-trace: ..." and leave the file without records; the harness reports
 * that as the profiler's failure. */
#define _GNU_SOURCE
#include <cupti.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BUFFER_BYTES ((size_t)8 << 20)

static FILE *g_out;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_recording;

static const CUpti_ActivityKind g_kinds[] = {
    CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMCPY2,
    CUPTI_ACTIVITY_KIND_MEMSET};

static void report(const char *what, CUptiResult r) {
    const char *s = NULL;
    cuptiGetResultString(r, &s);
    fprintf(stderr, "pk-cupti-trace: %s: %s\n", what, s ? s : "unknown error");
}

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    *buffer = aligned_alloc(8, BUFFER_BYTES);
    *size = *buffer ? BUFFER_BYTES : 0;
    *max_records = 0;
}

static void write_record(const CUpti_Activity *rec) {
    switch (rec->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    case CUPTI_ACTIVITY_KIND_KERNEL: {
        const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)rec;
        fprintf(g_out, "K %u %u %llu %llu %s\n", k->deviceId, k->streamId,
                (unsigned long long)k->start, (unsigned long long)k->end, k->name ? k->name : "?");
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)rec;
        int peer = m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
        fprintf(g_out, "%c %u %u %llu %llu %s\n", peer ? 'C' : 'M', m->deviceId, m->streamId,
                (unsigned long long)m->start, (unsigned long long)m->end,
                peer ? "peer copy" : "memcpy");
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY2: {
        const CUpti_ActivityMemcpyPtoP4 *m = (const CUpti_ActivityMemcpyPtoP4 *)rec;
        fprintf(g_out, "C %u %u %llu %llu peer copy\n", m->deviceId, m->streamId,
                (unsigned long long)m->start, (unsigned long long)m->end);
        break;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
        const CUpti_ActivityMemset4 *m = (const CUpti_ActivityMemset4 *)rec;
        fprintf(g_out, "M %u %u %llu %llu memset\n", m->deviceId, m->streamId,
                (unsigned long long)m->start, (unsigned long long)m->end);
        break;
    }
    default:
        break;
    }
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size,
                                      size_t valid) {
    (void)ctx;
    (void)stream;
    (void)size;
    CUpti_Activity *rec = NULL;
    pthread_mutex_lock(&g_mu);
    while (g_out && cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS)
        write_record(rec);
    size_t dropped = 0;
    if (cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped) == CUPTI_SUCCESS && dropped &&
        g_out)
        fprintf(g_out, "# dropped %zu records\n", dropped);
    if (g_out)
        fflush(g_out);
    pthread_mutex_unlock(&g_mu);
    free(buffer);
}

static void set_recording(int on) {
    if (on == g_recording)
        return;
    for (size_t i = 0; i < sizeof g_kinds / sizeof *g_kinds; i++) {
        CUptiResult r = on ? cuptiActivityEnable(g_kinds[i]) : cuptiActivityDisable(g_kinds[i]);
        if (r != CUPTI_SUCCESS && r != CUPTI_ERROR_NOT_COMPATIBLE)
            report(on ? "cuptiActivityEnable" : "cuptiActivityDisable", r);
    }
    g_recording = on;
}

/* Called by pk-runner right after cudaProfilerStop (it finds this library with dlopen
 * RTLD_NOLOAD on CUDA_INJECTION64_PATH), outside every CUPTI callback: the records of the
 * profiled call are written before the rank exits with _exit (no atexit handler runs). */
__attribute__((visibility("default"))) int pk_cupti_trace_flush(void) {
    set_recording(0);
    CUptiResult r = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    if (r != CUPTI_SUCCESS) {
        report("cuptiActivityFlushAll", r);
        return -1;
    }
    pthread_mutex_lock(&g_mu);
    if (g_out)
        fflush(g_out);
    pthread_mutex_unlock(&g_mu);
    return 0;
}

/* Called by pk-runner right before cudaProfilerStart, outside every CUPTI callback. */
__attribute__((visibility("default"))) int pk_cupti_trace_start(void) {
    set_recording(1);
    return 0;
}

static void at_exit(void) {
    pk_cupti_trace_flush();
    pthread_mutex_lock(&g_mu);
    if (g_out)
        fclose(g_out);
    g_out = NULL;
    pthread_mutex_unlock(&g_mu);
}

/* The entry point CUDA calls when it loads an injection library. */
__attribute__((visibility("default"))) int InitializeInjection(void) {
    const char *dir = getenv("PKGYM_PROFILE_TRACE_DIR");
    if (!dir || !*dir) {
        fprintf(stderr, "pk-cupti-trace: PKGYM_PROFILE_TRACE_DIR is not set\n");
        return 1;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/trace.%d", dir, (int)getpid());
    g_out = fopen(path, "w");
    if (!g_out) {
        fprintf(stderr, "pk-cupti-trace: cannot write %s\n", path);
        return 1;
    }
    fprintf(g_out, "# pk-cupti-trace 1\n");
    fflush(g_out);
    CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
    if (r != CUPTI_SUCCESS) {
        report("set-up", r);
        return 1;
    }
    /* PKGYM_PROFILE_TRACE_ALL=1: from the start (tests of the library on a plain program). */
    const char *all = getenv("PKGYM_PROFILE_TRACE_ALL");
    if (all && !strcmp(all, "1"))
        set_recording(1);
    atexit(at_exit);
    return 1;
}
