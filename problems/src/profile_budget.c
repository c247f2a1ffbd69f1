/* The server-wide profile budget: at most per_minute profile stages start in any 60 s window. */
#include "pk_profile.h"

#define WINDOW_MS 60000.0

int pk_profile_budget_init(pk_profile_budget *b, int per_minute, double seconds_each,
                           pk_error *err) {
    if (per_minute < 0 || per_minute > PK_PROFILE_BUDGET_MAX_PER_MINUTE)
        return pk_error_set(err, PK_ERR_INVALID, "profiles per minute must be in [0, %d]",
                            PK_PROFILE_BUDGET_MAX_PER_MINUTE);
    if (!(seconds_each >= 1 && seconds_each <= 600))
        return pk_error_set(err, PK_ERR_INVALID, "seconds per profile must be in [1, 600]");
    b->per_minute = per_minute;
    b->seconds_each = seconds_each;
    b->head = b->n = 0;
    b->taken = b->refused = 0;
    if (pthread_mutex_init(&b->mu, NULL))
        return pk_error_set(err, PK_ERR_SYSTEM, "cannot make the profile budget's mutex");
    return PK_OK;
}

void pk_profile_budget_destroy(pk_profile_budget *b) {
    pthread_mutex_destroy(&b->mu);
}

int pk_profile_budget_take(pk_profile_budget *b, double now_ms) {
    pthread_mutex_lock(&b->mu);
    /* Drop the starts that left the window (the ring is in start order). */
    while (b->n > 0) {
        int oldest =
            (b->head - b->n + PK_PROFILE_BUDGET_MAX_PER_MINUTE) % PK_PROFILE_BUDGET_MAX_PER_MINUTE;
        if (now_ms - b->starts_ms[oldest] < WINDOW_MS)
            break;
        b->n--;
    }
    int ok = b->n < b->per_minute;
    if (ok) {
        b->starts_ms[b->head] = now_ms;
        b->head = (b->head + 1) % PK_PROFILE_BUDGET_MAX_PER_MINUTE;
        b->n++;
        b->taken++;
    } else {
        b->refused++;
    }
    pthread_mutex_unlock(&b->mu);
    return ok;
}
