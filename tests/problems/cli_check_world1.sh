#!/bin/sh
# `pkgym check --world-size 1`: only with --reference (a single-GPU diagnostic of the reference's
# numerics, which the pkb cross-check can use with one GPU), with a warning; a candidate at a
# world outside the problem's world sizes is refused, and so is any other world the problem lacks.
fail=0
check() { if ! "$@"; then echo "FAIL: $*"; fail=1; fi; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$PKGYM" check --problem selftest/allreduce --reference --world-size 1 --skip-timing --trials 2 \
    >"$tmp/ref.out" 2>"$tmp/ref.err"
check test $? -eq 0
check grep -q '^status: correct' "$tmp/ref.out"
check grep -q 'world size 1 is not one of selftest/allreduce' "$tmp/ref.err"
src=$(ls "$PK_SOURCE_DIR"/problems/selftest/allreduce/solutions/correct.* | head -1)
"$PKGYM" check --problem selftest/allreduce --world-size 1 --skip-timing "$src" \
    >"$tmp/cand.out" 2>"$tmp/cand.err"
check test $? -eq 1
check grep -q 'world size 1 .*not allowed' "$tmp/cand.err"
check test ! -s "$tmp/cand.out"
"$PKGYM" check --problem selftest/allreduce --reference --world-size 3 --skip-timing \
    >/dev/null 2>"$tmp/w3.err"
check test $? -eq 1
check grep -q 'world size 3 .*not allowed' "$tmp/w3.err"
[ $fail -eq 0 ] && echo "pkgym check --world-size 1: ok"
exit $fail
