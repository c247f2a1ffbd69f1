# Sourced by the scripts: puts nvcc on PATH and picks the build directories.
export PATH="/usr/local/cuda/bin:$PATH"
PK_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PK_BUILD="${PK_BUILD:-$PK_ROOT/build}"
PK_JOBS="${PK_JOBS:-$(nproc)}"
export PK_ROOT PK_BUILD PK_JOBS
