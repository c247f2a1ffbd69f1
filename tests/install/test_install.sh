#!/usr/bin/env bash
# `cmake --install` into a temporary prefix, moved elsewhere afterwards, then used with the
# source and build trees hidden (a tmpfs over each, in a private mount namespace): pkgym finds
# its problems, modules, runner, templates and hook host in the installed tree; `pkgym check`
# evaluates a selftest solution; `pkgym serve` answers the Python client and a C program built
# against the installed C client through pkg-config.
set -u
here=$(cd "$(dirname "$0")" && pwd)
fail=0
check() { if ! "$@"; then echo "FAIL: $*"; fail=1; fi; }
tmp=$(mktemp -d /tmp/pkgym-install-test.XXXXXX)
chmod 755 "$tmp"
srv_pid=""
cleanup() { [ -n "$srv_pid" ] && kill "$srv_pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT

cmake --install "$PK_BUILD_DIR" --prefix "$tmp/staged" >"$tmp/install.log" 2>&1 \
    || { cat "$tmp/install.log"; exit 1; }
mv "$tmp/staged" "$tmp/prefix"   # relocated after installation: nothing may point at "staged"
p="$tmp/prefix"
for f in bin/pkgym libexec/pkgym/pk-runner libexec/pkgym/pk_summarizer_hook_host \
         share/pkgym/problems/hardware.json share/pkgym/problems/selftest/scale/meta.json \
         share/pkgym/templates/chat_system.txt share/pkgym/include/candidate/pk_ctx.h \
         lib/pkgym/modules/pkprob_selftest_scale.so lib/pkgym/plugins/libpk_summarizer_terse.so \
         include/pkgym/pk_client.h lib/libpkgym_client.so lib/pkgconfig/pkgym-client.pc; do
    check test -e "$p/$f"
done

# Hide the trees (build first: it may sit inside the source tree).
cd /
hide="mount -t tmpfs pkgym-hidden '$PK_BUILD_DIR' && mount -t tmpfs pkgym-hidden '$PK_SOURCE_DIR'"
if unshare -m sh -c "$hide" 2>/dev/null; then
    hidden=(unshare -m sh -c "$hide && exec \"\$@\"" sh)
    echo "source and build trees hidden in a private mount namespace"
    check "${hidden[@]}" test ! -e "$PK_SOURCE_DIR/CMakeLists.txt"
else
    hidden=(env -u PKGYM_PROBLEMS_ROOT -u PKGYM_MODULE_DIR -u PKGYM_RUNNER)
    echo "note: cannot make a mount namespace here (needs root); the trees stay visible"
fi
hidden() { "${hidden[@]}" "$@"; }

ver=$(hidden "$p/bin/pkgym" --version) || { echo "FAIL: --version"; fail=1; }
echo "$ver"
check grep -Eq "^pkgym [0-9]+\.[0-9]+\.[0-9]+$" <<<"$(head -1 <<<"$ver")"
check grep -q "^commit: " <<<"$ver"
check grep -q "^cuda: " <<<"$ver"
check grep -qx "layout:    installed, $p/share/pkgym" <<<"$ver"
check grep -qx "problems:  $p/share/pkgym/problems" <<<"$ver"
check grep -qx "modules:   $p/lib/pkgym/modules" <<<"$ver"
check grep -qx "templates: $p/share/pkgym/templates" <<<"$ver"

list=$(hidden "$p/bin/pkgym" problems list) || { echo "FAIL: problems list"; fail=1; }
check grep -q "^selftest/scale " <<<"$list"
check grep -q "^collectives/allreduce " <<<"$list"

sol="$p/share/pkgym/problems/selftest/scale/solutions"
for want in "correct:correct.cu" "incorrect:wrong_rank.cu"; do
    out=$(hidden "$p/bin/pkgym" check --json --skip-timing --problem selftest/scale "$sol/${want#*:}")
    status=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["status"])' <<<"$out" 2>/dev/null)
    [ "$status" = "${want%%:*}" ] || { echo "FAIL: check ${want#*:}: status '$status'"; echo "$out" | tail -20; fail=1; }
done

# The server from the installed tree, with a registered plugin hook (the hook host is in
# libexec; clients name hooks, the operator registers them: docs/security.md).
ep="ipc://$tmp/serve.sock"
"${hidden[@]}" "$p/bin/pkgym" serve --bind "$ep" --data-dir "$tmp/data" \
    --hook "terse=plugin:$p/lib/pkgym/plugins/libpk_summarizer_terse.so" >"$tmp/serve.log" 2>&1 &
srv_pid=$!
PYTHONPATH="$PK_SOURCE_DIR/rollout/python" ${PK_PYTHON:-python3} - "$ep" "$p" <<'PY' || fail=1
import sys, time
from pkgym_client import Client
ep, prefix = sys.argv[1], sys.argv[2]
c = Client(ep, timeout_s=60)
for _ in range(100):
    try:
        h = c.hello(); break
    except TimeoutError:
        time.sleep(0.2)
r = c.reset("selftest/scale", options={"feedback": {"hooks": {"feedback": "terse"}}})
s = c.step(r["episode"], "no code at all")
fb = s["observation"]["feedback"]
assert s["info"]["status"] == "format_error", s["info"]
assert fb.startswith("format_error: "), f"the terse plugin did not run: {fb!r}"
assert s["observation"]["messages"][0]["role"] == "system"
print("installed server:", h["server"], "terse feedback:", fb[:60])
PY

# The C client through pkg-config.
export PKG_CONFIG_PATH="$p/lib/pkgconfig"
flags=$(pkg-config --cflags --libs pkgym-client) || { echo "FAIL: pkg-config"; fail=1; }
check test "$(pkg-config --modversion pkgym-client)" = "$(head -1 <<<"$ver" | cut -d' ' -f2)"
# The build's own compiler (and sanitizer flags: an ASan-built library needs its runtime).
if ${PK_CC:-cc} ${PK_CC_FLAGS:-} -std=c11 -Wall -Werror -o "$tmp/client_hello" \
      "$here/client_hello.c" $flags -Wl,-rpath,"$p/lib"; then
    check "$tmp/client_hello" "$ep"
    check sh -c "ldd '$tmp/client_hello' | grep -q '$p/lib/libpkgym_client.so'"
else
    echo "FAIL: compiling against the installed C client"; fail=1
fi

kill -TERM "$srv_pid"; wait "$srv_pid"; rc=$?; srv_pid=""
check test "$rc" -eq 0
[ $fail -eq 0 ] || { echo "--- server log"; cat "$tmp/serve.log"; }
[ $fail -eq 0 ] && echo "install: ok"
exit $fail
