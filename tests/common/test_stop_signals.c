/* pk_stop_signals_catch: SIGTERM and SIGINT set the flag instead of ending the process, are
 * held back in the calling thread until it unblocks them, and SIGPIPE is ignored. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <pthread.h>
#include <signal.h>

#include "pk_stop_signals.h"

static void stop_signals_set_the_flag(void **state) {
    (void)state;
    sigset_t old, now;
    volatile sig_atomic_t *stop = pk_stop_signals_catch(&old);
    assert_non_null(stop);
    assert_int_equal(*stop, 0);
    assert_int_equal(sigismember(&old, SIGTERM), 0); /* the mask before: not blocked */
    pthread_sigmask(SIG_BLOCK, NULL, &now);
    assert_int_equal(sigismember(&now, SIGTERM), 1);
    assert_int_equal(sigismember(&now, SIGINT), 1);

    assert_int_equal(raise(SIGTERM), 0); /* blocked: pending, not delivered */
    assert_int_equal(*stop, 0);
    sigset_t pending;
    sigpending(&pending);
    assert_int_equal(sigismember(&pending, SIGTERM), 1);
    pthread_sigmask(SIG_SETMASK, &old, NULL); /* delivered now, to the handler */
    assert_int_equal(*stop, 1);

    assert_int_equal(raise(SIGINT), 0); /* the process survives SIGINT too */
    assert_int_equal(*stop, 1);
    assert_int_equal(raise(SIGPIPE), 0); /* ignored */
    struct sigaction sa;
    sigaction(SIGPIPE, NULL, &sa);
    assert_true(sa.sa_handler == SIG_IGN);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(stop_signals_set_the_flag),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
