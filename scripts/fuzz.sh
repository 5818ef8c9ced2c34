#!/usr/bin/env bash
# Fuzzes the job spec loader (loadJobSpec) with libFuzzer, ASan and UBSan for SECONDS
# seconds (default 60), then merges the inputs that found new coverage into
# tests/fuzz/corpus (minimised with -merge=1) so that they can be committed; the corpus
# test (ctest -R corpus) replays them on every build.
#
#   scripts/fuzz.sh [SECONDS]
#
# Builds with clang into build-fuzz/ (installing clang and libclang-rt-14-dev when
# missing). Fuzzing runs on a scratch copy of tests/fuzz/corpus and configs/examples.
# Crash, timeout and out-of-memory inputs are kept under build-fuzz/fuzz-artifacts/<time>/;
# if there is any, their paths are printed and the exit status is 1. Reproduce one with
#   build-fuzz/bin/yard_spec_fuzzer -rss_limit_mb=2048 <file>
#
# Environment:
#   YARD_JOBS       build jobs (default 2)
#   YARD_FUZZ_FORK  run N fuzzing processes with libFuzzer's -fork=N, which goes on after a
#                   crash, timeout or OOM and so collects several (default 0: one process
#                   that stops at the first)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

seconds=${1:-60}
case "$seconds" in '' | *[!0-9]*) echo "usage: scripts/fuzz.sh [SECONDS]" >&2; exit 2 ;; esac
build=$root/build-fuzz
corpus=$root/tests/fuzz/corpus
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
cmake --build "$build" --target yard_spec_fuzzer -j"${YARD_JOBS:-2}"
fuzzer=$build/bin/yard_spec_fuzzer

# --- fuzz ----------------------------------------------------------------------------
scratch=$(mktemp -d "${TMPDIR:-/tmp}/yard-fuzz.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$scratch/corpus" "$corpus"
cp -r "$corpus"/. "$scratch/corpus/"
cp configs/examples/*.yaml "$scratch/corpus/"
artifacts=$build/fuzz-artifacts/$(date +%Y%m%d-%H%M%S)
mkdir -p "$artifacts"
log=$artifacts/fuzz.log

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_stack_use_after_return=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
limits=(-max_len=65536 -timeout=10 -rss_limit_mb=2048)
opts=("${limits[@]}" -max_total_time="$seconds" -artifact_prefix="$artifacts/" -print_final_stats=1
      -dict="$root/tests/fuzz/spec.dict")
if [ "$fork" -gt 0 ]; then
  opts+=(-fork="$fork" -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
fi
before=$(find "$corpus" -type f | wc -l)
echo "fuzz: ${seconds}s on $(find "$scratch/corpus" -type f | wc -l) seed inputs; log in $log"
set +e
(cd "$artifacts" && "$fuzzer" "${opts[@]}" "$scratch/corpus") >"$log" 2>&1
status=$?
set -e
grep -E "^(Done [0-9]+ runs|stat::|INFO: fuzzed for|INFO: exiting|==[0-9]+==ERROR|SUMMARY|Test unit written|#[0-9]+.*DONE)" "$log" | tail -n 20 || true
grep -E "^#[0-9]+: " "$log" | tail -n 1 || true  # -fork's progress line

# --- merge into the committed corpus --------------------------------------------------
# Keeps every file already in tests/fuzz/corpus and adds those scratch inputs that reach
# new edges (-use_counters=0: hit counts do not count, which keeps the corpus small),
# smallest first. Inputs that crash are left out (they are artifacts).
echo "fuzz: merging new inputs into tests/fuzz/corpus"
(cd "$artifacts" && "$fuzzer" -merge=1 -use_counters=0 "${limits[@]}" -artifact_prefix="$artifacts/merge-" \
  "$corpus" "$scratch/corpus") >"$artifacts/merge.log" 2>&1 ||
  echo "fuzz: merge ended with status $? (see $artifacts/merge.log)" >&2
after=$(find "$corpus" -type f | wc -l)
bytes=$(du -sb "$corpus" | cut -f1)
echo "fuzz: corpus $before -> $after files, $bytes bytes"
if [ "$after" -gt 300 ] || [ "$bytes" -gt $((2 * 1024 * 1024)) ]; then
  echo "fuzz: the corpus is over 300 files or 2 MB; minimise it before committing, e.g." >&2
  echo "  mkdir /tmp/min && $fuzzer -merge=1 -use_counters=0 -max_len=65536 /tmp/min $corpus" >&2
fi

# --- verdict -------------------------------------------------------------------------
mapfile -t found < <(find "$artifacts" -type f \( -name 'crash-*' -o -name 'timeout-*' -o -name 'oom-*' \
  -o -name 'leak-*' -o -name 'merge-crash-*' -o -name 'merge-timeout-*' -o -name 'merge-oom-*' \) | sort)
if [ ${#found[@]} -gt 0 ]; then
  echo "fuzz: FAILED: ${#found[@]} input(s) crashed, hung or ran out of memory (log: $log):" >&2
  printf '  %s\n' "${found[@]}" >&2
  exit 1
fi
if [ "$status" -ne 0 ]; then
  echo "fuzz: FAILED: the fuzzer exited with status $status (log: $log)" >&2
  exit 1
fi
echo "fuzz: no crash in ${seconds}s"
