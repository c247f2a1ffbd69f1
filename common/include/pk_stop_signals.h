/* pk_stop_signals: how the long-running commands (`pkgym serve`, `pkgym worker`) learn that
 * they should stop. */
#ifndef PK_STOP_SIGNALS_H
#define PK_STOP_SIGNALS_H

#include <signal.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Catches SIGINT and SIGTERM into a flag (returned; it only ever goes from 0 to 1) and ignores
 * SIGPIPE. Also blocks SIGINT and SIGTERM in the calling thread, its previous mask saved into
 * *old when old is not NULL: threads started next inherit the block, so that only the thread
 * that unblocks them (the event loop) is interrupted. */
volatile sig_atomic_t *pk_stop_signals_catch(sigset_t *old);

#ifdef __cplusplus
}
#endif
#endif
