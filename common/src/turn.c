/* The turn record's texts: freed, copied and measured in one place for every holder. */
#include "pk_turn.h"

#include <stdlib.h>
#include <string.h>

void pk_turn_free(pk_turn *t) {
    free(t->prompt);
    free(t->action);
    free(t->summary);
    free(t->code);
    free(t->feedback);
    free(t->result_json);
    memset(t, 0, sizeof *t);
}

/* 0 when text is NULL, or when its copy was made. */
static int copy_text(char **to, const char *text) {
    *to = text ? strdup(text) : NULL;
    return text && !*to;
}

int pk_turn_copy(pk_turn *to, const pk_turn *from) {
    *to = *from;
    int missing = copy_text(&to->prompt, from->prompt);
    missing |= copy_text(&to->action, from->action);
    missing |= copy_text(&to->summary, from->summary);
    missing |= copy_text(&to->code, from->code);
    missing |= copy_text(&to->feedback, from->feedback);
    missing |= copy_text(&to->result_json, from->result_json);
    if (missing) {
        pk_turn_free(to);
        return PK_ERR_NOMEM;
    }
    return PK_OK;
}

static size_t text_bytes(const char *s) {
    return s ? strlen(s) + 1 : 0;
}

size_t pk_turn_text_bytes(const pk_turn *t) {
    return text_bytes(t->prompt) + text_bytes(t->action) + text_bytes(t->summary) +
           text_bytes(t->code) + text_bytes(t->feedback) + text_bytes(t->result_json);
}
