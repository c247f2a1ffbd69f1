#!/usr/bin/env bash
# The long libFuzzer campaign over the server loop (tests/env/fuzz/fuzz_server.c; issue 27).
# Usage: bench/fuzz/server-campaign.sh BUILD_DIR OUT_DIR SECONDS [JOBS]
#   BUILD_DIR: a plain build (scripts/build; its static libraries are linked);
#   OUT_DIR:   gets the binaries, the corpus (seeded from tests/env/fuzz/server-corpus), the
#              logs, crash artifacts (art/) and, at the end, coverage.txt.
# The env sources and the harness are compiled with clang-14 for libFuzzer and UBSan (no ASan,
# for speed: ctest's env_fuzz_server runs the same target under ASan+UBSan); a second build
# with source-based coverage replays the final corpus for llvm-cov. Runs at nice 19.
set -euo pipefail
B=$(cd "$1" && pwd); O=$(mkdir -p "$2" && cd "$2" && pwd); SECONDS_TOTAL=$3; JOBS=${4:-2}
W=$(cd "$(dirname "$0")/../.." && pwd)
INC=(-I"$W/env/include" -I"$W/env/src" -I"$W/protocol/include" -I"$W/common/include" -I"$W/rollout/include"
     -I"$W/problems/include" -I"$W/sandbox/include" -I"$W/reward/include"
     -I"$W/summarizer_hooks/include" -I"$W/archive/include" -isystem /usr/local/cuda/include)
DEFS=(-DPK_VERSION='"0.1.0"' -DPK_FUZZ_PROBLEMS_DIR="\"$W/problems\""
      -DPK_FUZZ_MODULES_DIR="\"$B/problems/modules\"")
SRCS=("$W/tests/env/fuzz/fuzz_server.c" "$W/tests/env/fuzz/fuzz_evaluator.c")
# The server loop's sources (env/CMakeLists.txt, PK_ENV_LOOP_SOURCES): every env source but the
# command lines and the evaluator (fuzz_evaluator.c stands in); and the protocol's.
for f in "$W"/env/src/*.c; do
    case ${f##*/} in cli_*.c | main.c | version.c | evaluator.c) continue ;; esac
    SRCS+=("$f")
done
SRCS+=("$W"/protocol/src/*.c)
LIBS=("$B/rollout/libpk_remote.a" "$B/rollout/libpk_rollout.a" "$B/reward/libpk_reward.a"
      "$B/archive/libpk_archive.a"
      "$B/summarizer_hooks/libpk_summarizer.a" "$B/problems/libpk_problems.a"
      "$B/sandbox/libpk_sandbox.a" "$B/common/libpk_common.a" "$B/rollout/libpk_rollout_core.a"
      "$B/problems/libpk_problems.a" "$B/sandbox/libpk_sandbox.a"
      "$B/problems/libpk_problem_spec.a" "$B/rollout/client/libpk_client.a"
      "$B/common/libpk_common.a"
      -lseccomp -lelf -lzmq -lmsgpackc -ljansson -lsqlite3 -lm -ldl -lpthread)
build() { # NAME FLAGS...
    local name=$1; shift
    mkdir -p "$O/obj-$name"
    local objs=()
    for f in "${SRCS[@]}"; do
        local o="$O/obj-$name/$(basename "$f" .c).o"
        clang-14 -O2 -g -std=gnu11 "$@" "${DEFS[@]}" "${INC[@]}" -c "$f" -o "$o"
        objs+=("$o")
    done
    clang-14 "$@" "${objs[@]}" "${LIBS[@]}" -o "$O/$name"
}
build fuzz_env_server -fsanitize=fuzzer,undefined -fno-sanitize-recover=undefined
build fuzz_env_server_cov -fsanitize=fuzzer -fprofile-instr-generate -fcoverage-mapping
mkdir -p "$O/corpus" "$O/art"
cp -n "$W"/tests/env/fuzz/server-corpus/* "$O/corpus/"
cd "$O"
nice -n 19 ./fuzz_env_server -seed=2729 -jobs="$JOBS" -workers="$JOBS" \
    -max_total_time="$SECONDS_TOTAL" -rss_limit_mb=3072 -max_len=8192 -print_final_stats=1 \
    -artifact_prefix="$O/art/" corpus > campaign.log 2>&1 || true
# Runs: the sum over the jobs' final stats; coverage: the final corpus replayed once.
grep -h "stat::number_of_executed_units" fuzz-*.log | awk '{s += $2} END {print "runs:", s}'
LLVM_PROFILE_FILE="$O/cov.profraw" ./fuzz_env_server_cov -runs=0 corpus > cov-replay.log 2>&1
llvm-profdata-14 merge -o cov.profdata cov.profraw
llvm-cov-14 report ./fuzz_env_server_cov -instr-profile=cov.profdata "$W"/env/src/*.c "$W"/protocol/src/*.c > coverage.txt
ls art
