#!/bin/sh
# `pkgym sandbox`: usage errors exit 2; a command's verdict is one JSON line with every field.
set -u
fail() { echo "FAIL: $*"; exit 1; }
[ -x "${PKGYM:-}" ] || fail "pkgym is not built (PKGYM=${PKGYM:-unset})"
"$PKGYM" sandbox >/dev/null 2>&1; [ $? -eq 2 ] || fail "no command: want exit 2"
"$PKGYM" sandbox --wall-ms x -- /bin/true >/dev/null 2>&1; [ $? -eq 2 ] || fail "bad number: want exit 2"
"$PKGYM" sandbox --help | grep -q -- "--gpus LIST" || fail "--help lacks the options"
out=$("$PKGYM" sandbox --wall-ms 5000 -- /bin/sh -c 'echo hi; exit 4') || fail "verdict: exit $?"
printf "%s\n" "$out"
for k in '"status":"exit"' '"exit_code":4' '"signal":0' '"wall_ms":' '"cpu_ms":' \
         '"max_rss_kb":' '"stdout":"hi\n"' '"stderr":""' '"truncated":false' '"limits":'; do
    case $out in *"$k"*) ;; *) fail "missing $k" ;; esac
done
echo ok
