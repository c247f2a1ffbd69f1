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
bad=0
for f in $files; do
    if ! "$cf" --dry-run -Werror "$f" >/dev/null 2>&1; then
        echo "needs clang-format: $f"; bad=1
    fi
done
[ $bad -eq 0 ] && echo "format: $(wc -w <<<"$files") files ok"
exit $bad
