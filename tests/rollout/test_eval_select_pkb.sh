#!/usr/bin/env bash
# `suite:pkb` is every ParallelKernelBench problem wherever it lives (the collectives are PKB 1-8):
# `pkgym eval` (from the server's list) and `pkgym problems list --suite` (from the loader) select
# the same ids. Without GPUs eval leaves each one out by name, which shows its selection.
set -euo pipefail
: "${PKGYM:?}"
tmp=$(mktemp -d /tmp/pk-test-evalsel-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$PKGYM" problems list --suite pkb | awk '{print $1}' | sort >"$tmp/listed"
n=$(wc -l <"$tmp/listed")
[ "$n" -eq 87 ] || fail "problems list --suite pkb shows $n problems"
grep -qx collectives/allreduce "$tmp/listed" || fail "the collectives are not in suite:pkb"
grep -q '^cuco/\|^selftest/\|^primitives/' "$tmp/listed" && fail "a non-PKB problem in suite:pkb"

mkdir -p "$tmp/replay"
rc=0
"$PKGYM" eval --policy "replay:$tmp/replay" --problems suite:pkb -G 1 -T 1 --out "$tmp/out" \
    --serve-arg --gpus --serve-arg none --serve-arg --compile-workers --serve-arg 1 \
    >"$tmp/eval.log" 2>&1 || rc=$?
[ "$rc" -ne 0 ] || fail "eval with no GPU evaluated something"
sed -n 's/^pkgym eval: \([^ ]*\) left out: needs .*/\1/p' "$tmp/eval.log" | sort >"$tmp/selected"
diff "$tmp/listed" "$tmp/selected" || fail "eval's suite:pkb differs from problems list --suite pkb"
grep -q "$n need more GPUs" "$tmp/eval.log" || fail "eval's summary: $(tail -1 "$tmp/eval.log")"
echo "suite:pkb: $n problems, the same in eval and problems list"
