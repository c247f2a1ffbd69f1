#!/usr/bin/env bash
# Fails when any C or CUDA source tracked by git differs from .clang-format.
set -u
cf=$1
cd "$PK_SOURCE_DIR" || exit 1
files=$(git ls-files '*.c' '*.h' '*.cu' '*.cuh' 2>/dev/null)
[ -n "$files" ] || { echo "no sources found"; exit 1; }
bad=0
for f in $files; do
    if ! "$cf" --dry-run -Werror "$f" >/dev/null 2>&1; then
        echo "needs clang-format: $f"; bad=1
    fi
done
[ $bad -eq 0 ] && echo "format: $(wc -w <<<"$files") files ok"
exit $bad
