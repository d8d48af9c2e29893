#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Re-measures the peer columns of the comparison table in bench/README.md (actors_bench): Erlang/OTP
# 25 (compare.escript) and CAF 0.17 (caf_compare.cc), each with its default configuration, on
# three workloads: the 4 -> 1 fan-in of 10 M events with no flow control (events/s), the peak
# RSS growth of that run, and the bytes per idle actor with 1 M alive. Each program runs
# COMPARE_RUNS times (default 3), and the median of each figure is printed as markdown rows.
#
# It installs Debian's erlang-base and libcaf-dev when they are missing: they are only for this
# comparison, not dependencies of Troupe. The measurements run under the shared build lock, so
# that no build or other benchmark runs beside them; the compile runs at nice 19 on one core.
#
# Environment (all optional):
#   COMPARE_RUNS=3            runs of each program and workload
#   COMPARE_EVENTS=10000000   fan-in events in total (4 senders, EVENTS/4 each)
#   COMPARE_ACTORS=1000000    idle actors alive at once
#   COMPARE_TIMEOUT=120       seconds allowed for one run
#   COMPARE_LOCK=/tmp/troupe-build.lock   the build lock; COMPARE_LOCK= (empty) runs without it,
#                             for a quick check with small sizes only, never for figures
#   COMPARE_LOCK_WAIT=5400    seconds to wait for the lock before giving up
#   COMPARE_BUILD_DIR=${TMPDIR:-/tmp}/troupe-compare   where the CAF program is built
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

runs=${COMPARE_RUNS:-3}
events=${COMPARE_EVENTS:-10000000}
actors=${COMPARE_ACTORS:-1000000}
run_timeout=${COMPARE_TIMEOUT:-120}
lock=${COMPARE_LOCK-/tmp/troupe-build.lock}
lock_wait=${COMPARE_LOCK_WAIT:-5400}
build_dir=${COMPARE_BUILD_DIR:-${TMPDIR:-/tmp}/troupe-compare}

# --- the measurement phase: run under the lock by the part below (re-entered with --measure) ---
if [[ ${1:-} == --measure ]]; then
  out=$2
  : >"$out"
  for ((round = 1; round <= runs; round++)); do
    for job in "erlang fanin" "caf fanin" "erlang idle" "caf idle"; do
      read -r framework workload <<<"$job"
      size=$events
      [[ $workload == idle ]] && size=$actors
      if [[ $framework == erlang ]]; then
        cmd=(escript "$here/compare.escript" "$workload" "$size")
      else
        cmd=("$build_dir/caf_compare" "$workload" "$size")
      fi
      if line=$(timeout "$run_timeout" "${cmd[@]}" 2>&1 | tail -n 1) && [[ $line == "$workload "* ]]; then
        echo "run $round $framework $line" | tee -a "$out"
      else
        echo "run $round $framework $workload FAILED (exit or timeout ${run_timeout} s): $line" |
          tee -a "$out"
      fi
    done
  done
  exit 0
fi

# --- install, build -------------------------------------------------------------------------
missing=()
for pkg in erlang-base libcaf-dev; do
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$pkg")
  fi
done
if ((${#missing[@]})); then
  sudo=()
  ((EUID == 0)) || sudo=(sudo)
  echo "installing ${missing[*]} (for this comparison only)" >&2
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get -qq update >/dev/null
  "${sudo[@]}" apt-get -qq install -y --no-install-recommends "${missing[@]}" >/dev/null
fi

mkdir -p "$build_dir"
# CAF 0.17.6 builds as C++20 with g++ 12.
nice -n 19 g++ -O2 -std=c++20 -I "$here/../.." -o "$build_dir/caf_compare" "$here/caf_compare.cc" \
  -lcaf_core -pthread

otp=$(erl -noshell -eval 'io:format("~s", [erlang:system_info(otp_release)]), halt().')
caf=$(dpkg-query -W -f='${Version}' libcaf-dev)
caf_short=$(cut -d. -f1,2 <<<"$caf")
echo "Erlang/OTP $otp ($(dpkg-query -W -f='${Version}' erlang-base)), CAF $caf, $(g++ --version | head -n 1)," \
  "$(nproc) cores, $(date -u +%F), runs=$runs events=$events actors=$actors"

# --- measure --------------------------------------------------------------------------------
raw=$build_dir/raw.txt
if [[ -n $lock ]]; then
  echo "waiting for $lock (at most $lock_wait s)..." >&2
  flock -w "$lock_wait" "$lock" bash "$0" --measure "$raw"
else
  echo "WARNING: no lock, for a quick check only" >&2
  bash "$0" --measure "$raw"
fi

# --- the table ------------------------------------------------------------------------------
# median FRAMEWORK WORKLOAD KEY SCALE FORMAT: the median over the runs of KEY / SCALE, printed with
# FORMAT ("failed" when no run gave the figure).
median() {
  grep -E "^run [0-9]+ $1 $2 " "$raw" | grep -oE "(^| )$3=[-0-9.]+" | cut -d= -f2 |
    sort -g | awk -v scale="$4" -v format="$5" '
      { v[NR] = $1 }
      END {
        if (NR == 0) { print "failed"; exit }
        m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
        printf format "\n", m / scale
      }'
}

events_m=$(awk -v e="$events" 'BEGIN { printf "%g", e / 1e6 }')
actors_m=$(awk -v a="$actors" 'BEGIN { printf "%g", a / 1e6 }')
echo
echo "Median of $runs runs each:"
echo
echo "| workload | Erlang $otp | CAF $caf_short |"
echo "|---|---:|---:|"
echo "| fan-in 4 -> 1, $events_m M events, no flow control (M events/s) |" \
  "$(median erlang fanin events_per_s 1e6 %.2f) | $(median caf fanin events_per_s 1e6 %.2f) |"
echo "| peak RSS growth of that run (MiB) |" \
  "$(median erlang fanin peak_rss_growth_mib 1 %.1f) | $(median caf fanin peak_rss_growth_mib 1 %.1f) |"
echo "| bytes per idle actor ($actors_m M alive) |" \
  "$(median erlang idle bytes_per_actor 1 %.0f) | $(median caf idle bytes_per_actor 1 %.0f) |"
