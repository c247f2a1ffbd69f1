#!/usr/bin/env bash
# Fails when any C, C++ or CUDA source tracked by git differs from .clang-format, or when the
# clang-format given is not version 14 (other versions format differently).
set -u
cf=$1
cd "$PK_SOURCE_DIR" || exit 1
version=$("$cf" --version 2>/dev/null)
case "$version" in
    *"version 14."*) ;;
    *) echo "$cf is not clang-format 14 ($version): run scripts/setup"; exit 1 ;;
esac
files=$(git ls-files '*.c' '*.h' '*.cu' '*.cuh' '*.cpp' 2>/dev/null)
[ -n "$files" ] || { echo "no sources found"; exit 1; }
# Batches of files, two clang-format at a time (one process per file took ~90 s of CI's 2 cores
# for ~750 files, near the test's limit on a loaded machine).
out=$(printf '%s\n' $files | xargs -n 64 -P 2 "$cf" --dry-run -Werror 2>&1 >/dev/null)
rc=$?
if [ $rc -ne 0 ]; then
    named=$(grep -oE '^[^: ]+\.(c|h|cu|cuh|cpp):[0-9]+:[0-9]+: error' <<<"$out" | cut -d: -f1 | sort -u)
    if [ -n "$named" ]; then
        sed 's/^/needs clang-format: /' <<<"$named"
    else
        echo "clang-format failed (exit $rc) without naming a file:"; echo "$out" | head -20
    fi
    exit 1
fi
echo "format: $(wc -w <<<"$files") files ok"
exit 0
