#!/usr/bin/env bash
# The CLI contract: --version, help, --help on every subcommand, unknown commands fail.
set -u
fail=0
check() { if ! "$@"; then echo "FAIL: $*"; fail=1; fi; }

ver=$("$PKGYM" --version) || { echo "FAIL: --version exited non-zero"; exit 1; }
check grep -Eq '^pkgym [0-9]+\.[0-9]+\.[0-9]+$' <<<"$(head -1 <<<"$ver")"
# Then the build information: protocol, commit, build configuration, CUDA/NCCL, paths in use.
check grep -q '^protocol:  1$' <<<"$ver"
check grep -Eq '^commit:    ([0-9a-f]{12}(-dirty)?|unknown .*)$' <<<"$ver"
check grep -Eq '^build:     [A-Za-z]+, [A-Za-z]+ [0-9.]+, sanitizers (none|address,undefined), ' <<<"$ver"
check grep -Eq '^cuda:      [0-9.]+ \(architectures .+\), nccl [0-9]+\.[0-9]+\.[0-9]+$' <<<"$ver"
check grep -q "^layout:    build tree" <<<"$ver"
check grep -qx "problems:  $PK_SOURCE_DIR/problems" <<<"$ver"

help=$("$PKGYM" help)
for cmd in serve check sandbox eval reward export problems; do
    check grep -q "^  $cmd " <<<"$help"
    out=$("$PKGYM" "$cmd" --help 2>&1); rc=$?
    # A built subcommand documents its usage and succeeds; one not built yet says so and fails.
    if [ $rc -eq 0 ]; then
        check grep -qi "usage" <<<"$out"
    else
        check grep -q "not built yet" <<<"$out"
    fi
done

"$PKGYM" no-such-command >/dev/null 2>&1; rc=$?
check [ $rc -eq 2 ]
"$PKGYM" >/dev/null 2>&1; rc=$?
check [ $rc -ne 0 ]
[ $fail -eq 0 ] && echo "cli contract: ok"
exit $fail
