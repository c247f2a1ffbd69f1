/* The profile levels of the episode option `profile` (docs/protocol.md, "reset"). */
#include "pk_profile.h"

#include <string.h>

static const char *const names[] = {"none", "summary", "full"};

int pk_profile_level_parse(const char *s) {
    for (int i = 0; s && i < 3; i++)
        if (!strcmp(s, names[i]))
            return i;
    return -1;
}

const char *pk_profile_level_name(int level) {
    return level >= 0 && level < 3 ? names[level] : "none";
}
