/* pk_summarizer: feedback text, reasoning removal, context trimming and pluggable summarizer hooks.
 */
#ifndef PK_SUMMARIZER_H
#define PK_SUMMARIZER_H

#include "pk_common.h"

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif
#endif
