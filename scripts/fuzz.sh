#!/usr/bin/env bash
# Fuzzes with libFuzzer, ASan and UBSan for SECONDS seconds per target (default 60), then
# merges the inputs that found new coverage into the target's committed corpus (minimised
# with -merge=1); ctest (-R corpus) replays both corpora on every build. Targets:
#   spec   the job spec loader (loadJobSpec): yard_spec_fuzzer, tests/fuzz/corpus
#   frame  the API frames as the servers read them (tests/fuzz/frame_fuzz.h: header limits,
#          segment table, every field as api::Request, agentapi::AgentRequest and
#          agentapi::AgentCall): yard_frame_fuzzer, tests/fuzz/frame_corpus
#   all    both, one after the other (the default)
#
#   scripts/fuzz.sh [--target spec|frame|all] [SECONDS]
#
# Builds with clang into build-fuzz/ (installing clang and libclang-rt-14-dev when
# missing). Fuzzing runs on a scratch copy of the corpus (for spec, plus configs/examples).
# Crash, timeout and out-of-memory inputs are kept under
# build-fuzz/fuzz-artifacts/<time>-<target>/; if there is any, their paths are printed and
# the exit status is 1. Reproduce one with
#   build-fuzz/bin/yard_spec_fuzzer -rss_limit_mb=2048 <file>     (or yard_frame_fuzzer)
#
# Environment:
#   YARD_FUZZ_TARGET  the target when --target is not given (default all)
#   YARD_JOBS         build jobs (default 2)
#   YARD_FUZZ_FORK    run N fuzzing processes with libFuzzer's -fork=N, which goes on after a
#                     crash, timeout or OOM and so collects several (default 0: one process
#                     that stops at the first)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

usage() { echo "usage: scripts/fuzz.sh [--target spec|frame|all] [SECONDS]" >&2; exit 2; }
target=${YARD_FUZZ_TARGET:-all}
seconds=60
while [ $# -gt 0 ]; do
  case "$1" in
    --target) [ $# -ge 2 ] || usage; target=$2; shift 2 ;;
    --target=*) target=${1#--target=}; shift ;;
    -h | --help) usage ;;
    *) seconds=$1; shift ;;
  esac
done
case "$seconds" in '' | *[!0-9]*) usage ;; esac
case "$target" in
  spec) targets=(spec) ;;
  frame) targets=(frame) ;;
  all) targets=(spec frame) ;;
  *) echo "fuzz: unknown target \"$target\" (spec, frame or all)" >&2; usage ;;
esac
build=$root/build-fuzz
fork=${YARD_FUZZ_FORK:-0}

# --- toolchain -----------------------------------------------------------------------
missing=()
command -v clang >/dev/null && command -v clang++ >/dev/null || missing+=(clang)
dpkg-query -W -f='${Status}' libclang-rt-14-dev 2>/dev/null | grep -q "install ok installed" ||
  missing+=(libclang-rt-14-dev)
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "fuzz: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
    sudo="sudo"
  fi
  echo "fuzz: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# --- build ---------------------------------------------------------------------------
# Everything is instrumented (fuzzer-no-link: coverage for libFuzzer, without its main);
# the fuzzer target itself links with -fsanitize=fuzzer (tests/fuzz/CMakeLists.txt).
# -O1 without -DNDEBUG keeps assertions on.
san="-fsanitize=address,undefined -fsanitize=fuzzer-no-link -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
san+=" -Wno-unknown-warning-option"  # the project's -Wshadow=local is gcc's
if [ -f "$build/CMakeCache.txt" ] && ! grep -q "^CMAKE_CXX_COMPILER:.*clang++" "$build/CMakeCache.txt"; then
  echo "fuzz: $build was configured with another compiler; reconfiguring from scratch"
  rm -rf "$build"
fi
generator=()
command -v ninja >/dev/null && [ ! -f "$build/Makefile" ] && generator=(-G Ninja)
CC=clang CXX=clang++ cmake -S . -B "$build" "${generator[@]}" \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_FLAGS="$san" -DCMAKE_CXX_FLAGS="$san" \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" \
  -DYARD_FUZZ=ON -DBUILD_TESTING=ON >/dev/null
fuzzers=()
for t in "${targets[@]}"; do fuzzers+=("yard_${t}_fuzzer"); done
cmake --build "$build" --target "${fuzzers[@]}" -j"${YARD_JOBS:-2}"

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_stack_use_after_return=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
limits=(-max_len=65536 -timeout=10 -rss_limit_mb=2048)
scratch=$(mktemp -d "${TMPDIR:-/tmp}/yard-fuzz.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
stamp=$(date +%Y%m%d-%H%M%S)
failed=()

# Fuzzes target $1 for $seconds, merges into its corpus, and records a failure in `failed`.
fuzz_target() {
  local t=$1 fuzzer=$build/bin/yard_$1_fuzzer corpus seeds=() dict=()
  case "$t" in
    spec) corpus=$root/tests/fuzz/corpus; seeds=(configs/examples/*.yaml); dict=(-dict="$root/tests/fuzz/spec.dict") ;;
    frame) corpus=$root/tests/fuzz/frame_corpus ;;
  esac
  local rel=${corpus#"$root"/}

  # --- fuzz --------------------------------------------------------------------------
  local work=$scratch/$t
  mkdir -p "$work" "$corpus"
  cp -r "$corpus"/. "$work/"
  if [ ${#seeds[@]} -gt 0 ]; then cp "${seeds[@]}" "$work/"; fi
  local artifacts=$build/fuzz-artifacts/$stamp-$t
  mkdir -p "$artifacts"
  local log=$artifacts/fuzz.log
  local opts=("${limits[@]}" -max_total_time="$seconds" -artifact_prefix="$artifacts/" -print_final_stats=1 "${dict[@]}")
  if [ "$fork" -gt 0 ]; then
    opts+=(-fork="$fork" -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
  fi
  local before status
  before=$(find "$corpus" -type f | wc -l)
  echo "fuzz[$t]: ${seconds}s on $(find "$work" -type f | wc -l) seed inputs; log in $log"
  set +e
  (cd "$artifacts" && "$fuzzer" "${opts[@]}" "$work") >"$log" 2>&1
  status=$?
  set -e
  grep -E "^(Done [0-9]+ runs|stat::|INFO: fuzzed for|INFO: exiting|==[0-9]+==ERROR|SUMMARY|Test unit written|#[0-9]+.*DONE)" "$log" | tail -n 20 || true
  grep -E "^#[0-9]+: " "$log" | tail -n 1 || true  # -fork's progress line

  # --- merge into the committed corpus ------------------------------------------------
  # Keeps every file already in the corpus and adds those scratch inputs that reach new
  # edges (-use_counters=0: hit counts do not count, which keeps the corpus small),
  # smallest first. Inputs that crash are left out (they are artifacts).
  echo "fuzz[$t]: merging new inputs into $rel"
  (cd "$artifacts" && "$fuzzer" -merge=1 -use_counters=0 "${limits[@]}" -artifact_prefix="$artifacts/merge-" \
    "$corpus" "$work") >"$artifacts/merge.log" 2>&1 ||
    echo "fuzz[$t]: merge ended with status $? (see $artifacts/merge.log)" >&2
  local after bytes
  after=$(find "$corpus" -type f | wc -l)
  bytes=$(du -sb "$corpus" | cut -f1)
  echo "fuzz[$t]: corpus $before -> $after files, $bytes bytes"
  if [ "$after" -gt 300 ] || [ "$bytes" -gt $((2 * 1024 * 1024)) ]; then
    echo "fuzz[$t]: the corpus is over 300 files or 2 MB; minimise it before committing, e.g." >&2
    echo "  mkdir /tmp/min && $fuzzer -merge=1 -use_counters=0 -max_len=65536 /tmp/min $corpus" >&2
  fi

  # --- verdict -----------------------------------------------------------------------
  local found
  mapfile -t found < <(find "$artifacts" -type f \( -name 'crash-*' -o -name 'timeout-*' -o -name 'oom-*' \
    -o -name 'leak-*' -o -name 'merge-crash-*' -o -name 'merge-timeout-*' -o -name 'merge-oom-*' \) | sort)
  if [ ${#found[@]} -gt 0 ]; then
    echo "fuzz[$t]: FAILED: ${#found[@]} input(s) crashed, hung or ran out of memory (log: $log):" >&2
    printf '  %s\n' "${found[@]}" >&2
    failed+=("$t")
  elif [ "$status" -ne 0 ]; then
    echo "fuzz[$t]: FAILED: the fuzzer exited with status $status (log: $log)" >&2
    failed+=("$t")
  else
    echo "fuzz[$t]: no crash in ${seconds}s"
  fi
}

for t in "${targets[@]}"; do fuzz_target "$t"; done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: FAILED: ${failed[*]}" >&2
  exit 1
fi
