// attention_fiber.cpp: the fiber scheduler of attention_fiber.h. Warp by warp (see
// pk_emul_run_cta): a fiber runs until it waits at a barrier or returns, then the next one runs.
#include "attention_fiber.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <vector>

#include "attention_emul.h"

// Under AddressSanitizer every stack switch is announced, so that it checks each fiber's
// accesses against that fiber's stack (without, it warns and may report false overflows).
#if defined(__SANITIZE_ADDRESS__)
#define PK_FIBER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PK_FIBER_ASAN 1
#endif
#endif
#ifdef PK_FIBER_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

namespace {

// The tile keeps its fragments in registers, which here are locals (the WMMA emulation holds
// 16 x 16 floats per fragment); ASan's redzones make frames larger still. Measured: 13 KiB at
// most, 22 KiB under ASan. Below each stack lies an inaccessible page, so that a deeper stack
// faults (cmocka reports the signal) instead of overwriting memory unseen.
constexpr size_t kStackBytes = 64 * 1024;

struct Fiber {
    ucontext_t ctx;
    char *stack;        // kStackBytes, one of g_stacks
    unsigned phase = 0; // attention_emul.h's pk_emul_phase, this fiber's
    bool done = false;
    const PkEmulBarrier *wait_on = nullptr; // the barrier it waits at, until its generation moves
    unsigned wait_generation = 0;
    void *fake_stack = nullptr; // ASan's, across this fiber's switches out
};

struct Scheduler {
    ucontext_t main;
    std::vector<Fiber> fibers;
    unsigned current = 0;
    void (*body)(void *) = nullptr;
    void *arg = nullptr;
    const void *main_stack = nullptr;
    size_t main_stack_bytes = 0;
};

Scheduler *g_scheduler; // the CTA being run (one at a time: the test is single-threaded)
// Kept from CTA to CTA (a fresh stack per CTA faulted its pages in anew: most of the run's time).
char *g_stacks[1024];
unsigned g_stack_count;

void switch_to_main(Fiber &f, bool dying) {
    Scheduler &s = *g_scheduler;
#ifdef PK_FIBER_ASAN
    __sanitizer_start_switch_fiber(dying ? nullptr : &f.fake_stack, s.main_stack,
                                   s.main_stack_bytes);
#else
    (void)dying;
#endif
    swapcontext(&f.ctx, &s.main);
#ifdef PK_FIBER_ASAN
    __sanitizer_finish_switch_fiber(f.fake_stack, nullptr, nullptr);
#endif
}

void fiber_entry() {
    Scheduler &s = *g_scheduler;
#ifdef PK_FIBER_ASAN
    __sanitizer_finish_switch_fiber(nullptr, &s.main_stack, &s.main_stack_bytes);
#endif
    s.body(s.arg);
    Fiber &f = s.fibers[s.current];
    f.done = true;
    switch_to_main(f, true); // never resumed
    abort();
}

// getcontext and swapcontext return twice: they are kept out of functions with loops, whose
// variables the compiler would have to keep in memory (gcc's -Wclobbered).
__attribute__((noinline)) void make_fiber(Fiber &f) {
    if (getcontext(&f.ctx) != 0) {
        perror("warp emulation: getcontext");
        abort();
    }
    f.ctx.uc_stack.ss_sp = f.stack;
    f.ctx.uc_stack.ss_size = kStackBytes;
    f.ctx.uc_link = nullptr;
    makecontext(&f.ctx, fiber_entry, 0);
}

__attribute__((noinline)) void resume(Scheduler &s, Fiber &f) {
#ifdef PK_FIBER_ASAN
    void *main_fake = nullptr;
    __sanitizer_start_switch_fiber(&main_fake, f.stack, kStackBytes);
#endif
    swapcontext(&s.main, &f.ctx);
#ifdef PK_FIBER_ASAN
    __sanitizer_finish_switch_fiber(main_fake, nullptr, nullptr);
#endif
}

} // namespace

void pk_emul_barrier_wait(PkEmulBarrier *b) {
    Scheduler &s = *g_scheduler;
    if (++b->arrived == b->count) {
        b->arrived = 0;
        b->generation++;
        return;
    }
    Fiber &f = s.fibers[s.current];
    f.wait_on = b;
    f.wait_generation = b->generation;
    switch_to_main(f, false); // resumed once the last thread has arrived
    f.wait_on = nullptr;
}

void pk_emul_run_cta(unsigned threads, void (*body)(void *), void *arg) {
    Scheduler s;
    s.body = body;
    s.arg = arg;
    s.fibers.resize(threads);
    if (threads > sizeof g_stacks / sizeof *g_stacks) {
        fprintf(stderr, "warp emulation: %u threads in a CTA (at most 1024)\n", threads);
        abort();
    }
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    for (; g_stack_count < threads; g_stack_count++) {
        char *base = static_cast<char *>(mmap(nullptr, page + kStackBytes, PROT_READ | PROT_WRITE,
                                              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
        if (base == MAP_FAILED || mprotect(base, page, PROT_NONE) != 0) {
            perror("warp emulation: fiber stack");
            abort();
        }
        g_stacks[g_stack_count] = base + page;
    }
    for (unsigned t = 0; t < threads; t++) {
        Fiber &f = s.fibers[t];
        f.stack = g_stacks[t];
        make_fiber(f);
    }
    Scheduler *outer = g_scheduler;
    g_scheduler = &s;
    // Warp by warp: a warp runs until each of its threads has returned or waits at a barrier
    // that only other warps can complete (__syncthreads), so one warp runs as far ahead of the
    // others as the hardware allows. Rounds alternate between warp order and its reverse: with a
    // __syncthreads missing, a warp reads shared memory before its writer has run, or after the
    // next write, whichever the direction (in lockstep, as in one pass per barrier, it did not).
    const unsigned warps = (threads + 31) / 32;
    for (unsigned live = threads, round = 0; live > 0; round++) {
        bool ran = false;
        for (unsigned i = 0; i < warps; i++) {
            const unsigned w = round % 2 ? warps - 1 - i : i;
            const unsigned end = w * 32 + 32 < threads ? w * 32 + 32 : threads;
            for (bool warp_ran = true; warp_ran;) {
                warp_ran = false;
                for (unsigned t = w * 32; t < end; t++) {
                    Fiber &f = s.fibers[t];
                    if (f.done || (f.wait_on && f.wait_on->generation == f.wait_generation))
                        continue;
                    s.current = t;
                    threadIdx.x = t;
                    pk_emul_phase = f.phase;
                    resume(s, f);
                    f.phase = pk_emul_phase;
                    live -= f.done;
                    warp_ran = ran = true;
                }
            }
        }
        if (live > 0 && !ran) {
            fprintf(stderr,
                    "warp emulation: %u of %u threads wait at barriers no other thread "
                    "will reach (the hardware would hang)\n",
                    live, threads);
            abort();
        }
    }
    g_scheduler = outer;
}
