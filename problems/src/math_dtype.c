/* Names of the math dtypes of roofline phases (the keys of hardware.json's "tflops"). */
#include "pk_problem_spec.h"

#include <string.h>

static const char *const math_names[PK_MATH_COUNT] = {
    [PK_MATH_BF16] = "bf16", [PK_MATH_FP16] = "fp16", [PK_MATH_FP8] = "fp8",
    [PK_MATH_TF32] = "tf32", [PK_MATH_FP32] = "fp32",
};

const char *pk_math_dtype_name(pk_math_dtype t) {
    return (unsigned)t < PK_MATH_COUNT ? math_names[t] : "?";
}

int pk_math_dtype_from_name(const char *name) {
    for (int i = 0; i < PK_MATH_COUNT; i++)
        if (strcmp(math_names[i], name) == 0)
            return i;
    /* The spellings of argument dtypes, so one meta.json uses one vocabulary if it likes. */
    if (strcmp(name, "f16") == 0)
        return PK_MATH_FP16;
    if (strcmp(name, "f32") == 0)
        return PK_MATH_FP32;
    return -1;
}
