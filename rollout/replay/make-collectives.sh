#!/usr/bin/env bash
# Builds the replay policy of the collectives suite from the suite's own test solutions:
#   OUT/collectives/<name>/turn1.md  a compile error (correct.cu with the entry point's
#                                    parameter type misspelt, `pkctx`)
#   OUT/collectives/<name>/turn2.md  wrong.cu (compiles and runs; the verdict is incorrect)
#   OUT/collectives/<name>/turn3.md  correct.cu
# Generated, not committed, so it always matches problems/collectives/*/solutions.
#   rollout/replay/make-collectives.sh OUT_DIR
set -euo pipefail
out=${1:?usage: make-collectives.sh OUT_DIR}
src=$(cd "$(dirname "$0")/../.." && pwd)
n=0
for dir in "$src"/problems/collectives/*/; do
    name=$(basename "$dir")
    correct=$dir/solutions/correct.cu wrong=$dir/solutions/wrong.cu
    [ -f "$correct" ] && [ -f "$wrong" ] || continue
    grep -q 'int solution(const pk_ctx \*ctx' "$correct" || {
        echo "make-collectives: $correct: no 'int solution(const pk_ctx *ctx' to misspell" >&2
        exit 1
    }
    d=$out/collectives/$name
    mkdir -p "$d"
    response() { # intro, code file, summary
        printf '%s\n\n```cuda\n' "$1"
        cat "$2"
        printf '```\n\nSummary: %s\n' "$3"
    }
    sed 's/int solution(const pk_ctx \*ctx/int solution(const pkctx *ctx/' "$correct" >"$d/.turn1.cu"
    # wrong.cu opens with a comment saying it is test data: a model would not write that.
    sed '1,/^[^/]/{/^\/\//d}' "$wrong" >"$d/.turn2.cu"
    response "A first NVLink kernel on the symmetric arena, peer loads and stores." \
        "$d/.turn1.cu" "NVLink load/store kernel (first attempt)." >"$d/turn1.md"
    response "Fixed the type name in the entry point (pk_ctx). Reworked the block indexing." \
        "$d/.turn2.cu" "NVLink load/store kernel, reworked block placement." >"$d/turn2.md"
    response "Some ranks got their blocks in the wrong places: placing each block by its source rank." \
        "$correct" "NVLink load/store kernel, blocks placed by source rank." >"$d/turn3.md"
    rm -f "$d/.turn1.cu" "$d/.turn2.cu"
    n=$((n + 1))
done
[ "$n" -gt 0 ] || { echo "make-collectives: no solutions under problems/collectives" >&2; exit 1; }
echo "make-collectives: $n problems -> $out/collectives"
