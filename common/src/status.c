#include "pk_status.h"

#include <string.h>

static const char *const names[PK_STATUS_COUNT] = {
    "format_error", "rejected",  "compile_error", "runtime_error",
    "timeout",      "incorrect", "correct",       "infra_error",
};

const char *pk_status_name(pk_status s) {
    return (s >= 0 && s < PK_STATUS_COUNT) ? names[s] : "unknown";
}

int pk_status_from_name(const char *name) {
    for (int i = 0; name && i < PK_STATUS_COUNT; i++)
        if (strcmp(names[i], name) == 0)
            return i;
    return -1;
}
