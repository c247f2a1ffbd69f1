#!/bin/sh
# pkb_crosscheck_timing.py on 2 GPUs (exit 77, skipped, without them). TORCHRUN: torchrun.
[ -e /dev/nvidia0 ] && [ -e /dev/nvidia1 ] || exit 77
here=$(cd "$(dirname "$0")" && pwd)
src=${PK_SOURCE_DIR:-$here/../..}
exec ${TORCHRUN:-torchrun} --nproc-per-node 2 --master-port "${XC_PORT:-29631}" \
    "$here/pkb_crosscheck_timing.py" "$src/bench/pkb-crosscheck/crosscheck.py" cuda
