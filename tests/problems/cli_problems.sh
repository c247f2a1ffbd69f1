#!/bin/sh
# `pkgym problems`: list (with --tag and --json), show (prompt and meta.json), unknown ids.
fail=0
check() { if ! "$@"; then echo "FAIL: $*"; fail=1; fi; }
list=$("$PKGYM" problems --tag selftest) || { echo "FAIL: list exited non-zero"; exit 1; }
check test "$(echo "$list" | grep -c '^selftest/')" -ge 3
check test "$(echo "$list" | grep -vc '^selftest/')" -eq 0
json=$("$PKGYM" problems list --tag selftest --json)
check sh -c "echo '$json' | grep -q '\"id\": \"selftest/allreduce\"'"
prompt=$("$PKGYM" problems show selftest/scale)
check sh -c "echo \"\$0\" | grep -q 'extern \"C\" int solution'" "$prompt"
meta=$("$PKGYM" problems show selftest/scale --json)
check sh -c "echo \"\$0\" | grep -q '\"launcher\": \"mpi\"'" "$meta"
"$PKGYM" problems show selftest/no-such-problem >/dev/null 2>&1
check test $? -eq 1
"$PKGYM" problems --bogus >/dev/null 2>&1
check test $? -eq 2
[ $fail -eq 0 ] && echo "pkgym problems: ok"
exit $fail
