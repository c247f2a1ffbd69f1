#!/bin/sh
# The runner exports nothing a submission could link against: no function at all, and no
# data of its own (only copy relocations of libc/MPI objects it references, e.g. stderr).
runner=$1
out=$(nm -D --defined-only "$runner") || { echo "nm failed on $runner"; exit 1; }
funcs=$(echo "$out" | awk '$2 ~ /^[TtWiI]$/ {print $3}')
own=$(echo "$out" | awk '{print $3}' | grep -E '^(pk_|rn_|main$)')
if [ -n "$funcs" ] || [ -n "$own" ]; then
    echo "pk-runner exports: $funcs $own"
    exit 1
fi
echo "pk-runner exports no functions and no harness symbols ($(echo "$out" | grep -c .) copy-relocated objects)"
