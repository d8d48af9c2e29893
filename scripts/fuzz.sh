#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Builds the libFuzzer targets (build/fuzz: clang, TROUPE_FUZZ=ON, ASan+UBSan) and runs each one,
# seeded with its committed corpus (fuzz/corpus/<target>/):
#
#   scripts/fuzz.sh --seconds S [target...]   each target for S seconds (CI: --seconds 15)
#   scripts/fuzz.sh --runs N [target...]      each target for N inputs
#                                             (--runs 10000000: ten million each)
#   (both: whichever limit comes first)
#
# Targets: fuzz_frame_decoder fuzz_handshake fuzz_event_records fuzz_config (default: all).
# Prints one line per target with the inputs executed and exec/s (libFuzzer's "Done N runs"), and
# exits 1 when a target crashed, timed out or broke an invariant; its crash file
# (build/fuzz/artifacts/<target>/crash-...) is printed: replay it with
# `build/fuzz/fuzz/<target> <file>`, fix the bug, and copy it to fuzz/regressions/<target>/.
# New inputs the fuzzer finds go to build/fuzz/corpus/<target>/, never into fuzz/corpus.
# The build and each run hold /tmp/troupe-build.lock (one at a time, as every build on a shared
# 2-core machine does), released in between.
set -euo pipefail
cd "$(dirname "$0")/.."

all_targets=(fuzz_frame_decoder fuzz_handshake fuzz_event_records fuzz_config)
usage() {
  echo "usage: scripts/fuzz.sh [--seconds S] [--runs N] [target...] (at least one limit)" >&2
  echo "targets: ${all_targets[*]}" >&2
  exit 2
}

limit=()
while [[ $# -gt 0 && "$1" == --* ]]; do
  [[ $# -ge 2 && "$2" =~ ^[0-9]+$ ]] || usage
  case "$1" in
    --seconds) limit+=(-max_total_time="$2") ;;
    --runs) limit+=(-runs="$2") ;;
    *) usage ;;
  esac
  shift 2
done
[[ ${#limit[@]} -gt 0 ]] || usage
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=("${all_targets[@]}")
for target in "${targets[@]}"; do
  [[ " ${all_targets[*]} " == *" $target "* ]] || { echo "fuzz: unknown target $target" >&2; usage; }
done

# Largest input per target: a few frames; a handshake (<= 4 KiB) and what follows it; one
# frame's records; a config file.
max_len() {
  case "$1" in
    fuzz_frame_decoder) echo 4096 ;;
    fuzz_handshake) echo 8192 ;;
    fuzz_event_records) echo 8192 ;;
    fuzz_config) echo 4096 ;;
  esac
}

build=build/fuzz
echo "=== fuzz: configure and build $build (clang, libFuzzer, ASan+UBSan)"
(
  flock 9
  cmake -S . -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only -DNDEBUG" -DTROUPE_UNITY_BUILD=ON \
    -DTROUPE_FUZZ=ON -DTROUPE_BUILD_TESTS=OFF -DTROUPE_BUILD_BENCHMARKS=OFF \
    -DTROUPE_BUILD_EXAMPLES=OFF -DTROUPE_WERROR=ON >/dev/null
  cmake --build "$build" -j2 --target "${targets[@]}"
) 9>/tmp/troupe-build.lock

export ASAN_OPTIONS=abort_on_error=1:detect_leaks=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
failed=()
summary=()
for target in "${targets[@]}"; do
  corpus="$build/corpus/$target"
  artifacts="$build/artifacts/$target"
  log="$build/logs/$target.log"
  mkdir -p "$corpus" "$artifacts" "$(dirname "$log")"
  echo "=== fuzz: $target ${limit[*]}"
  # The scratch corpus comes first: libFuzzer writes new inputs there; fuzz/corpus is read only.
  status=0
  flock /tmp/troupe-build.lock "$build/fuzz/$target" "${limit[@]}" \
    -max_len="$(max_len "$target")" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$artifacts/" "$corpus" "fuzz/corpus/$target" >"$log" 2>&1 || status=$?
  done_line=$(grep -E '^Done [0-9]+ runs in [0-9]+ second' "$log" | tail -1 || true)
  runs=$(sed -E 's/^Done ([0-9]+) runs in ([0-9]+) second.*/\1/' <<<"$done_line")
  secs=$(sed -E 's/^Done ([0-9]+) runs in ([0-9]+) second.*/\2/' <<<"$done_line")
  if [[ $status -ne 0 || -z "$done_line" ]]; then
    tail -n 40 "$log"
    crash=$(grep -oE 'Test unit written to [^ ]+' "$log" | tail -1 | sed 's/Test unit written to //')
    line="$target: FAILED (exit $status) after ${runs:-?} runs; crash file: ${crash:-none}; log: $log"
    failed+=("$target")
  else
    rate=$(grep -oE 'stat::average_exec_per_sec: *[0-9]+' "$log" | grep -oE '[0-9]+$' || true)
    line="$target: $runs runs in $secs s (${rate:-?} exec/s); scratch corpus $corpus: $(ls "$corpus" | wc -l) inputs"
  fi
  echo "$line"
  summary+=("$line")
done

echo
echo "fuzz summary:"
printf '  %s\n' "${summary[@]}"
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "fuzz: failed: ${failed[*]}" >&2
  exit 1
fi
