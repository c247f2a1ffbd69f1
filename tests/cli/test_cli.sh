#!/usr/bin/env bash
# The CLI contract: --version, help, --help on every subcommand, unknown commands fail.
set -u
fail=0
check() { if ! "$@"; then echo "FAIL: $*"; fail=1; fi; }

ver=$("$PKGYM" --version) || { echo "FAIL: --version exited non-zero"; exit 1; }
check grep -Eq '^pkgym [0-9]+\.[0-9]+\.[0-9]+$' <<<"$ver"

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
