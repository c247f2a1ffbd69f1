#!/bin/sh
# venv.sh DIR: the integration venv (requirements.txt + verl 0.7.1 without its dependencies),
# made once and reused while requirements.txt is unchanged; prints its python. Times the install
# on stderr.
set -e
dir=$1
here=$(cd "$(dirname "$0")" && pwd)
stamp=$(cat "$here/requirements.txt"; echo verl==0.7.1)
if [ ! -x "$dir/bin/python" ] || [ "$(cat "$dir/.pk-ready" 2>/dev/null)" != "$stamp" ]; then
    start=$(date +%s)
    rm -rf "$dir"
    /usr/bin/python3 -m venv "$dir" >&2
    "$dir/bin/python" -m pip install --quiet --disable-pip-version-check -r "$here/requirements.txt" >&2
    "$dir/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps verl==0.7.1 >&2
    printf '%s' "$stamp" >"$dir/.pk-ready"
    echo "integration venv: installed in $(( $(date +%s) - start )) s" >&2
fi
echo "$dir/bin/python"
