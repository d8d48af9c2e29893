#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Same-sitting A/B of Google Benchmark binaries: runs each binary in turn, ALTERNATIONS times, each
# process with REPETITIONS repetitions under the build lock, and prints per benchmark and binary
# the median over the processes of each process's median rate (items_per_second, or actors_per_s
# for skynet), the ratio of the last binary to the first, and every process's median. Alternating
# whole processes, rather than running one binary's processes back to back, spreads the host's
# slow spells over both sides; the per-process medians show them.
#
#   bench/ab.sh [-n ALTERNATIONS] [-r REPETITIONS] [-c COUNTER] FILTER BINARY...
#   bench/ab.sh -n 6 'BM_Ring/tokens:1/workers:2' /work/base/actors_bench build/release/bench/actors/actors_bench
#   bench/ab.sh -c rtt_us 'BM_RemotePingPong/' /work/base/session_bench build/release/bench/interconnect/session_bench
#
# The rates are in millions per second. -c compares another user counter instead: a rate
# (bytes_per_second: Benchmark's M, 2^20) in millions per second, anything else (rtt_us) as is. Needs only bash, flock and awk. TROUPE_BENCH_LOCK names
# another lock file than /tmp/troupe-build.lock.
set -euo pipefail

alternations=5
repetitions=3
counter='items_per_second|actors_per_s'
while getopts "n:r:c:" option; do
  case "$option" in
    n) alternations=$OPTARG ;;
    r) repetitions=$OPTARG ;;
    c) counter=$OPTARG ;;
    *) echo "usage: $0 [-n ALTERNATIONS] [-r REPETITIONS] [-c COUNTER] FILTER BINARY..." >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
if [[ $# -lt 2 ]]; then
  echo "usage: $0 [-n ALTERNATIONS] [-r REPETITIONS] [-c COUNTER] FILTER BINARY..." >&2
  exit 2
fi
filter=$1
shift
binaries=("$@")
for binary in "${binaries[@]}"; do
  [[ -x "$binary" ]] || { echo "ab: $binary is not an executable" >&2; exit 2; }
done

results=$(mktemp)
trap 'rm -f "$results"' EXIT
for ((round = 0; round < alternations; round++)); do
  for index in "${!binaries[@]}"; do
    # One line per benchmark: its median, tagged with the binary's index.
    flock "${TROUPE_BENCH_LOCK:-/tmp/troupe-build.lock}" "${binaries[$index]}" --benchmark_filter="$filter" \
      --benchmark_repetitions="$repetitions" --benchmark_report_aggregates_only=true 2>/dev/null |
      awk -v index_="$index" -v counter="$counter" '/_median / {
          name = $1; sub(/_median$/, "", name); sub(/\/process_time\/real_time$/, "", name)
          sub(/\/real_time$/, "", name)
          if (match($0, "(" counter ")=[0-9.]+[kMG]?")) {
            value = substr($0, RSTART, RLENGTH); sub(/.*=/, "", value)
            scale = 1
            if (value ~ /k$/) scale = 1e3; else if (value ~ /M$/) scale = 1e6
            else if (value ~ /G$/) scale = 1e9
            if (counter ~ /_per_s/) scale /= 1e6
            sub(/[kMG]$/, "", value)
            printf "%s %d %.4g\n", name, index_, value * scale
          }
        }' >>"$results" || true
  done
done

awk -v count="${#binaries[@]}" '
  function median(list,    values, n, i, j, t) {
    n = split(list, values, " ")
    for (i = 2; i <= n; i++) {
      for (j = i; j > 1 && values[j - 1] + 0 > values[j] + 0; j--) {
        t = values[j]; values[j] = values[j - 1]; values[j - 1] = t
      }
    }
    if (n == 0) return 0
    return n % 2 ? values[(n + 1) / 2] : (values[n / 2] + values[n / 2 + 1]) / 2
  }
  {
    if (!($1 in seen)) { seen[$1] = 1; order[++names] = $1 }
    runs[$1, $2] = runs[$1, $2] " " $3
  }
  END {
    printf "%-48s", "benchmark (median of process medians)"
    for (b = 0; b < count; b++) printf " %10s", "binary " b
    printf " %8s\n", "last/1st"
    for (k = 1; k <= names; k++) {
      name = order[k]
      printf "%-48s", name
      for (b = 0; b < count; b++) { m[b] = median(runs[name, b]); printf " %10.4g", m[b] }
      printf " %8.3f\n", (m[0] > 0 ? m[count - 1] / m[0] : 0)
      for (b = 0; b < count; b++) printf "    binary %d:%s\n", b, runs[name, b]
    }
  }' "$results"
