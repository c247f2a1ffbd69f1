#!/usr/bin/env bash
# The GPU pass for issue #12 (and #20's GPU test): run on the GPU machine after
# `scripts/gpu-test` has built build-gpu. Builds the tree before #12 (carried in .gpu/old, made
# with `git archive 26368c9 | tar -x -C .gpu/old`) for the cost comparison, then runs
# bench/harness/fidelity.py. Logs under $OUT.
set -u
cd "$(dirname "$0")/../.."
if [ -d .gpu/old ] && [ ! -x .gpu/old/build/env/pkgym ]; then
    P=/opt/pkdeps
    (cd .gpu/old && cmake -S . -B build -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_PREFIX_PATH=$P/usr \
        -DPK_PYTHON="$(command -v python3)" >/tmp/old-configure.log 2>&1 &&
        cmake --build build -j "$(nproc)" --target pkgym pk_problem_modules >/tmp/old-build.log 2>&1) ||
        { echo "old tree did not build"; tail -20 /tmp/old-build.log; }
fi
old=.gpu/old/build/env/pkgym
[ -x "$old" ] || old=
PKGYM=${PKGYM:-build-gpu/env/pkgym} python3 bench/harness/fidelity.py $old
