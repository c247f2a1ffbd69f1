#!/bin/sh
# Runs a pkb/77 solution's pull and attend kernels on the host under the warp emulation
# (driver77.cpp, shim77.h; no GPU, no NCCL) for every rank of W, against the closed form.
# Usage: bench/pkb/attention-emul/run77.sh SOLUTION.cu ["W R SPB CLIP HQ HKV SCALE" ...]
# (one quoted configuration per argument; default "2 2 70 100 4 2 1.68": partial tiles, the clip
# inside rank 1's segment). Exit status: 0 iff every configuration passed.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# the device part: struct Geo .. before solution(), dynamic shared memory as the driver's
{
    echo '#include "shim77.h"'
    sed -n '/^struct Geo {/,/^extern "C" int solution/p' "$1" | sed '$d' |
        sed 's/extern __shared__ __align__(128) unsigned char raw\[\];/unsigned char *raw = pk_emul_smem;/'
} >"$out/kern77.inc"
own=0
grep -q 'the exchange skipped' "$1" && own=1
g++ -std=c++20 -O2 -w -I"$out" -I"$here" -I"$root/tests/problems" -I"$root/common/include" \
    "$here/driver77.cpp" -o "$out/emul" -lpthread
shift
[ $# -gt 0 ] || set -- "2 2 70 100 4 2 1.68"
rc=0
for cfg in "$@"; do
    # shellcheck disable=SC2086
    OWN_ONLY=$own "$out/emul" $cfg || rc=1
done
exit $rc
