// attention_fiber.h: a CTA's CUDA threads as fibers (ucontext) of one OS thread, for the warp
// emulation of attention_emul.h. With one OS thread per CUDA thread, 128 threads met at every
// barrier through futexes: 18 s alone, up to 80 s beside other tests, 33 CPU s mostly in the
// kernel. Fibers switch in user space and run in a fixed order, so a run is also repeatable.
#ifndef PK_ATTENTION_FIBER_H
#define PK_ATTENTION_FIBER_H

// A barrier for n fibers of the running CTA (__syncthreads: all of them; __syncwarp: a warp's).
struct PkEmulBarrier {
    unsigned count, arrived, generation;
};

// Waits until count fibers have arrived; the others run meanwhile. A CTA whose fibers all wait
// and none can go on (a barrier some thread never reaches) aborts the test with a message, where
// the hardware would hang.
void pk_emul_barrier_wait(PkEmulBarrier *b);

// Runs body(arg) once per CUDA thread t in [0, threads), as fibers, until all have returned.
// Before each switch into fiber t it sets threadIdx.x = t and restores that fiber's
// pk_emul_phase (attention_emul.h's per-thread state); pk_emul_cta is the caller's.
void pk_emul_run_cta(unsigned threads, void (*body)(void *), void *arg);

#endif
