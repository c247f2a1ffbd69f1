#!/usr/bin/env bash
# rollout/python is pip-installable: build and install it from a copy (setuptools writes build
# files next to the sources) into a private target, then import it from there.
set -eu
py=${PK_PYTHON:-/usr/bin/python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp -r "$PK_SOURCE_DIR/rollout/python" "$tmp/src"
"$py" -m pip install --quiet --no-deps --no-build-isolation --no-index --target "$tmp/site" \
    "$tmp/src" 2>"$tmp/pip.log" || { cat "$tmp/pip.log"; exit 1; }
cd "$tmp"
PYTHONPATH="$tmp/site" "$py" - <<'PY'
import inspect
import pkgym_client
assert pkgym_client.__file__.startswith(__import__("os").getcwd()), pkgym_client.__file__
from pkgym_client import AsyncClient, Client, Env, ServerError
params = list(inspect.signature(Env.reset).parameters)
assert params == ["self", "seed", "options"], params
print("pip install: ok", pkgym_client.__file__)
PY
