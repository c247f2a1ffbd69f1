#include "pk_summarizer.h"

/* Keeps the library non-empty until issue #7 lands. */
int pk_summarizer_abi_version(void);
int pk_summarizer_abi_version(void) {
    return 0;
}
