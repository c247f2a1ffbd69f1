#!/bin/sh
# pyvenv.sh DIR PACKAGE...: a venv in DIR over Debian's python3 (its python3-zmq and
# python3-msgpack stay visible) with PACKAGEs from PyPI, made once and reused; prints its python.
set -e
dir=$1; shift
if ! "$dir/bin/python" -c "import sys" 2>/dev/null || [ ! -f "$dir/.pk-ready" ] \
    || [ "$(cat "$dir/.pk-ready")" != "$*" ]; then
    rm -rf "$dir"
    /usr/bin/python3 -m venv --system-site-packages "$dir" >&2
    "$dir/bin/python" -m pip install --quiet --disable-pip-version-check "$@" >&2
    echo "$*" >"$dir/.pk-ready"
fi
echo "$dir/bin/python"
