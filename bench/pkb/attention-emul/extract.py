"""Prints the device part of a pkb/54 solution (struct Args .. before solution()) as a C++
translation unit for the host warp emulation (solution_shim.h): the dynamic shared memory
becomes a per-thread pointer the driver sets."""
import sys
src = open(sys.argv[1]).read()
i = src.index('struct Args {'); j = src.index('extern "C" int solution')
body = src[i:j]
body = body.replace('extern __shared__ __align__(128) unsigned char raw[];', 'unsigned char *raw = pk_emul_smem;')
print('#include "solution_shim.h"\n' + body)
