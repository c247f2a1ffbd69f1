/* The turn record's texts: freed, copied and measured in one place for every holder, from one
 * list of the text fields. */
#include "pk_turn.h"

#include <stdlib.h>
#include <string.h>

static const size_t text_at[] = {offsetof(pk_turn, prompt),   offsetof(pk_turn, action),
                                 offsetof(pk_turn, summary),  offsetof(pk_turn, code),
                                 offsetof(pk_turn, feedback), offsetof(pk_turn, result_json)};
enum { N_TEXTS = sizeof text_at / sizeof *text_at };

static char **text_in(pk_turn *t, int i) {
    return (char **)((char *)t + text_at[i]);
}

static const char *text_of(const pk_turn *t, int i) {
    return *(char *const *)((const char *)t + text_at[i]);
}

void pk_turn_free(pk_turn *t) {
    for (int i = 0; i < N_TEXTS; i++)
        free(*text_in(t, i));
    memset(t, 0, sizeof *t);
}

int pk_turn_copy(pk_turn *to, const pk_turn *from) {
    *to = *from;
    int missing = 0;
    for (int i = 0; i < N_TEXTS; i++) {
        const char *text = text_of(from, i);
        char **copy = text_in(to, i);
        *copy = text ? strdup(text) : NULL;
        missing |= text && !*copy;
    }
    if (missing) {
        pk_turn_free(to); /* every text of *to is a copy or NULL */
        return PK_ERR_NOMEM;
    }
    return PK_OK;
}

size_t pk_turn_text_bytes(const pk_turn *t) {
    size_t bytes = 0;
    for (int i = 0; i < N_TEXTS; i++)
        bytes += text_of(t, i) ? strlen(text_of(t, i)) + 1 : 0;
    return bytes;
}
