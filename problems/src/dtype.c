/* Element types of problem arguments. */
#include "pk_problem_spec.h"

#include <string.h>

static const struct {
    const char *name;
    size_t size;
    double atol, rtol; /* defaults: ~1e-5 relative for fp32, 1e-2 for 16-bit floats */
} dtypes[PK_DTYPE_COUNT] = {
    [PK_DTYPE_BF16] = {"bf16", 2, 1e-2, 1e-2},
    [PK_DTYPE_F16] = {"f16", 2, 1e-3, 1e-3},
    [PK_DTYPE_F32] = {"f32", 4, 1e-5, 1e-5},
    [PK_DTYPE_F64] = {"f64", 8, 1e-12, 1e-12},
    [PK_DTYPE_I32] = {"i32", 4, 0, 0},
    [PK_DTYPE_I64] = {"i64", 8, 0, 0},
    /* fp8 e4m3 has 3 mantissa bits: one step is 12.5% at the bottom of a binade */
    [PK_DTYPE_F8E4M3] = {"f8e4m3", 1, 0.125, 0.125},
    [PK_DTYPE_I8] = {"i8", 1, 0, 0},
    [PK_DTYPE_U8] = {"u8", 1, 0, 0},
};

size_t pk_dtype_size(pk_dtype t) {
    return (unsigned)t < PK_DTYPE_COUNT ? dtypes[t].size : 0;
}

const char *pk_dtype_name(pk_dtype t) {
    return (unsigned)t < PK_DTYPE_COUNT ? dtypes[t].name : "?";
}

int pk_dtype_from_name(const char *name) {
    for (int i = 0; i < PK_DTYPE_COUNT; i++)
        if (strcmp(dtypes[i].name, name) == 0)
            return i;
    if (strcmp(name, "float32") == 0 || strcmp(name, "fp32") == 0)
        return PK_DTYPE_F32;
    if (strcmp(name, "bfloat16") == 0)
        return PK_DTYPE_BF16;
    if (strcmp(name, "fp8e4m3") == 0 || strcmp(name, "float8_e4m3fn") == 0)
        return PK_DTYPE_F8E4M3;
    return -1;
}

void pk_dtype_tolerance(pk_dtype t, double *atol, double *rtol) {
    *atol = (unsigned)t < PK_DTYPE_COUNT ? dtypes[t].atol : 0;
    *rtol = (unsigned)t < PK_DTYPE_COUNT ? dtypes[t].rtol : 0;
}
