#!/usr/bin/env bash
# The Python client builds as a wheel (pip wheel, offline, from a copy of the sources): the wheel
# holds every module, declares its extras, installs into a fresh venv and imports from there.
set -eu
py=${PK_PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -r "$PK_SOURCE_DIR/rollout/python" "$tmp/src"
"$py" -m pip wheel --quiet --no-deps --no-build-isolation --no-index -w "$tmp/dist" "$tmp/src" \
    >"$tmp/pip.log" 2>&1 || { cat "$tmp/pip.log"; exit 1; }
whl=$(ls "$tmp"/dist/*.whl)
case "$(basename "$whl")" in
    pkgym_client-*-py3-none-any.whl) ;;
    *) echo "FAIL: unexpected wheel name $(basename "$whl")"; exit 1 ;;
esac
"$py" - "$whl" <<'PY'
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
names = set(z.namelist())
want = {f"pkgym_client/{m}.py" for m in ("__init__", "client", "aio", "env", "group", "chat", "gym",
                                          "integrations/__init__", "integrations/_sync",
                                          "integrations/trl", "integrations/verl")}
missing = want - names
assert not missing, f"missing from the wheel: {sorted(missing)}"
meta = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
for extra in ("gym", "trl", "verl"):
    assert f"Provides-Extra: {extra}" in meta, f"extra {extra} not declared"
for dep in ("pyzmq", "msgpack"):
    assert f"Requires-Dist: {dep}" in meta, f"{dep} not required"
print("wheel:", sys.argv[1].rsplit("/", 1)[1], len(names), "files")
PY
"$py" -m venv --system-site-packages "$tmp/venv"
"$tmp/venv/bin/python" -m pip install --quiet --no-deps --no-index "$whl"
cd "$tmp"
"$tmp/venv/bin/python" - <<'PY'
import os
import pkgym_client, pkgym_client.chat, pkgym_client.group
import pkgym_client.integrations.trl as trl, pkgym_client.integrations.verl as verl
assert pkgym_client.__file__.startswith(os.path.join(os.getcwd(), "venv")), pkgym_client.__file__
from pkgym_client import AsyncClient
for m in ("hello", "close_episode", "trajectory", "reset_group", "step_group"):
    assert hasattr(AsyncClient, m), m
assert callable(trl.pkgym_reward) and issubclass(verl.PkgymInteraction, verl.BaseInteraction)
print("installed wheel: ok", pkgym_client.__file__)
PY
