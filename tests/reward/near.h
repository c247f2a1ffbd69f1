/* cmocka 1.1 has no assert_double_equal: compare doubles and print both on failure. */
#ifndef PK_TEST_NEAR_H
#define PK_TEST_NEAR_H

#include <math.h>

#define assert_near(got, want, tol)                                                                \
    do {                                                                                           \
        double got_ = (got), want_ = (want);                                                       \
        if (!(fabs(got_ - want_) <= (tol)))                                                        \
            fail_msg("%s = %.17g, want %.17g", #got, got_, want_);                                 \
    } while (0)

#endif
