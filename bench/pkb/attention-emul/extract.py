"""Prints the device part of a pkb/54 or 55 solution (struct Args .. before solution() or the
pack kernel, and 55's column macros) as a C++
translation unit for the host warp emulation (solution_shim.h): the dynamic shared memory
becomes a per-thread pointer the driver sets."""
import sys
src = open(sys.argv[1]).read()
i = src.index('struct Args {')
# pkb/55: its column macros, and the device code before the pack kernel
cols = ''
for mark in ('// Columns of head h', '// The bug:'):
    if mark in src:
        cols = src[src.index(mark):src.index('typedef __nv_bfloat16 bf16;')]
j = src.index('// k and v of this rank') if cols else src.index('extern "C" int solution')
body = src[i:j]
body = body.replace('extern __shared__ __align__(128) unsigned char raw[];', 'unsigned char *raw = pk_emul_smem;')
print('#include "solution_shim.h"\n' + cols + body)
