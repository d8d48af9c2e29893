#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Measures Troupe and its peers side by side, each program written as a new user would write it
# and run with its framework's defaults (README.md beside this script says what each does):
#
#   workload   | what                                                   | who
#   rtt        | remote round trip, one at a time, two processes (µs)    | CAF Erlang gRPC ZeroMQ Troupe
#   stream64   | remote 64 B events/s, one sender -> one receiver        | CAF Erlang gRPC ZeroMQ Troupe
#   stream64k  | remote 64 KiB events, GB/s, one connection              | CAF Erlang gRPC ZeroMQ Troupe
#   skynet     | skynet, 1,000,000 leaves (1.1 M actors), ms             | CAF Erlang Troupe
#   fanin      | fan-in 4 -> 1, no flow control, events/s; peak RSS     | CAF Erlang Troupe
#   pingpong   | local ping-pong, one pair, round trips/s                | CAF Erlang Troupe
#   ring       | ring of 1,000 actors, one token, hops/s                 | CAF Erlang Troupe
#   idle       | bytes per idle actor, 1,000,000 alive                   | CAF Erlang Troupe
#
# It installs the peers' Debian packages when they are missing (erlang-base, libcaf-dev,
# libgrpc++-dev, protobuf-compiler-grpc, libzmq3-dev: for this comparison only, not dependencies
# of Troupe), builds a Release tree of this checkout and installs it into a prefix (or takes
# COMPARE_TROUPE_PREFIX), builds the Troupe programs against that install as a user's project
# (troupe/CMakeLists.txt) and the peers' programs with g++ -O2, all at nice 19 under the build
# lock; then, under the lock again, runs every program and workload COMPARE_RUNS times, printing
# each run's line (or FAILED), and prints a markdown table of the medians.
#
# The remote programs run two processes on 127.0.0.1: the client starts the server and ends it by
# its PID. Distributed Erlang needs epmd: this script starts its own on a free loopback port
# (ERL_EPMD_PORT) and ends it by its PID.
#
# Environment (all optional):
#   COMPARE_RUNS=3                runs of each program and workload
#   COMPARE_ONLY=                 workloads to run: an extended regex on the names above
#                                 (e.g. 'rtt|stream64$') or a list ('rtt,ring'); default all
#   COMPARE_SIZES=full            'tiny' sets every size below to a smoke-test value (seconds per
#                                 run); sizes set explicitly still win
#   COMPARE_EVENTS=10000000       fan-in events in total (4 senders, EVENTS/4 each)
#   COMPARE_ACTORS=1000000        idle actors alive at once
#   COMPARE_LEAVES=1000000        skynet leaves (a power of 10)
#   COMPARE_PINGPONG=2000000      local ping-pong round trips
#   COMPARE_HOPS=10000000         ring hops
#   COMPARE_RTT=20000             remote round trips (after 1,000 untimed ones)
#   COMPARE_STREAM=1000000        remote 64 B events
#   COMPARE_STREAM_BIG=16384      remote 64 KiB events (1 GiB)
#   COMPARE_TIMEOUT=120           seconds allowed for one run
#   COMPARE_LOCK=/tmp/troupe-build.lock   the build lock; COMPARE_LOCK= (empty) runs without it,
#                                 for a quick check with small sizes only, never for figures
#   COMPARE_LOCK_WAIT=5400        seconds to wait for the lock before giving up
#   COMPARE_BUILD_DIR=${TMPDIR:-/tmp}/troupe-compare   where everything is built and installed
#   COMPARE_TROUPE_PREFIX=        an existing Troupe install to build against (skips the tree)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source_dir=$(cd "$here/../.." && pwd)

if [[ ${COMPARE_SIZES:-full} == tiny ]]; then
  : "${COMPARE_EVENTS:=200000}" "${COMPARE_ACTORS:=20000}" "${COMPARE_LEAVES:=10000}"
  : "${COMPARE_PINGPONG:=100000}" "${COMPARE_HOPS:=200000}" "${COMPARE_RTT:=1000}"
  : "${COMPARE_STREAM:=50000}" "${COMPARE_STREAM_BIG:=512}" "${COMPARE_RUNS:=1}"
elif [[ ${COMPARE_SIZES:-full} != full ]]; then
  echo "run.sh: COMPARE_SIZES must be 'full' or 'tiny', got '$COMPARE_SIZES'" >&2
  exit 2
fi
runs=${COMPARE_RUNS:-3}
# A list (commas or spaces) is an alternation of its names.
only=${COMPARE_ONLY:-}
only=${only//[ ,]/|}
events=${COMPARE_EVENTS:-10000000}
actors=${COMPARE_ACTORS:-1000000}
leaves=${COMPARE_LEAVES:-1000000}
pingpong=${COMPARE_PINGPONG:-2000000}
hops=${COMPARE_HOPS:-10000000}
rtt=${COMPARE_RTT:-20000}
stream=${COMPARE_STREAM:-1000000}
stream_big=${COMPARE_STREAM_BIG:-16384}
run_timeout=${COMPARE_TIMEOUT:-120}
lock=${COMPARE_LOCK-/tmp/troupe-build.lock}
lock_wait=${COMPARE_LOCK_WAIT:-5400}
build_dir=${COMPARE_BUILD_DIR:-${TMPDIR:-/tmp}/troupe-compare}
troupe_prefix=${COMPARE_TROUPE_PREFIX:-}

for knob in RUNS:runs EVENTS:events ACTORS:actors LEAVES:leaves PINGPONG:pingpong HOPS:hops \
  RTT:rtt STREAM:stream STREAM_BIG:stream_big TIMEOUT:run_timeout LOCK_WAIT:lock_wait; do
  value=${knob#*:}
  if ! [[ ${!value} =~ ^[1-9][0-9]*$ ]]; then
    echo "run.sh: COMPARE_${knob%%:*} must be a positive integer, got '${!value}'" >&2
    exit 2
  fi
done
if ! [[ $leaves =~ ^10*$ && $leaves -ge 10 ]]; then
  echo "run.sh: COMPARE_LEAVES must be a power of 10 (at least 10), got '$leaves'" >&2
  exit 2
fi

# Every workload and the frameworks that run it, in the table's order.
workloads=(rtt stream64 stream64k skynet fanin pingpong ring idle)
frameworks=(caf erlang grpc zmq troupe)
declare -A runs_on=(
  [rtt]="caf erlang grpc zmq troupe" [stream64]="caf erlang grpc zmq troupe"
  [stream64k]="caf erlang grpc zmq troupe" [skynet]="caf erlang troupe"
  [fanin]="caf erlang troupe" [pingpong]="caf erlang troupe" [ring]="caf erlang troupe"
  [idle]="caf erlang troupe")
selected=()
for workload in "${workloads[@]}"; do
  if [[ -z $only || $workload =~ $only ]]; then
    selected+=("$workload")
  fi
done
if ((${#selected[@]} == 0)); then
  echo "run.sh: COMPARE_ONLY='$only' matches no workload (${workloads[*]})" >&2
  exit 2
fi

# The command line of FRAMEWORK's program for WORKLOAD (its first word after the program is the
# mode, which starts the line the program prints).
command_for() {
  local framework=$1 workload=$2 args
  case $workload in
    rtt) args=(rtt "$rtt") ;;
    stream64) args=(stream "$stream" 64) ;;
    stream64k) args=(stream "$stream_big" 65536) ;;
    skynet) args=(skynet "$leaves") ;;
    fanin) args=(fanin "$events") ;;
    pingpong) args=(pingpong "$pingpong") ;;
    ring) args=(ring "$hops") ;;
    idle) args=(idle "$actors") ;;
  esac
  case $framework in
    caf) echo "$build_dir/caf_compare ${args[*]}" ;;
    erlang) echo "escript $here/compare.escript ${args[*]}" ;;
    grpc) echo "$build_dir/grpc_compare ${args[*]}" ;;
    zmq) echo "$build_dir/zmq_compare ${args[*]}" ;;
    troupe)
      case $workload in
        rtt | stream*) echo "$build_dir/troupe-programs/troupe_remote ${args[*]}" ;;
        *) echo "$build_dir/troupe-programs/troupe_compare ${args[*]}" ;;
      esac
      ;;
  esac
}

# Runs "$@" under the lock (or directly without one).
locked() {
  if [[ -n $lock ]]; then
    flock -w "$lock_wait" "$lock" "$@"
  else
    "$@"
  fi
}

# --- the measurement phase: run under the lock by the part below (re-entered with --measure) ---
if [[ ${1:-} == --measure ]]; then
  out=$2
  : >"$out"
  errors=$build_dir/errors
  mkdir -p "$errors"
  epmd_pid=
  stop_epmd() {
    if [[ -n $epmd_pid ]]; then
      kill "$epmd_pid" 2>/dev/null || true
      wait "$epmd_pid" 2>/dev/null || true
    fi
  }
  trap stop_epmd EXIT
  if [[ " ${selected[*]} " =~ \ (rtt|stream64|stream64k)\  ]]; then
    # Our own epmd for distributed Erlang, on a loopback port the kernel picks for the moment.
    ERL_EPMD_PORT=$(erl -noshell -eval '{ok, S} = gen_tcp:listen(0, [{ip, {127,0,0,1}}]),
      {ok, P} = inet:port(S), io:format("~b", [P]), halt().')
    export ERL_EPMD_PORT
    epmd -address 127.0.0.1 -port "$ERL_EPMD_PORT" &
    epmd_pid=$!
    sleep 0.5
  fi
  for ((round = 1; round <= runs; round++)); do
    for workload in "${selected[@]}"; do
      for framework in ${runs_on[$workload]}; do
        read -r -a cmd <<<"$(command_for "$framework" "$workload")"
        mode=${cmd[1]}
        [[ $framework == erlang ]] && mode=${cmd[2]}
        err=$errors/$framework-$workload.txt
        line=$(timeout "$run_timeout" "${cmd[@]}" 2>"$err" | grep -E "^$mode " | tail -n 1) ||
          true
        if [[ -n $line ]]; then
          echo "run $round $framework $workload $line" | tee -a "$out"
        else
          echo "run $round $framework $workload FAILED (exit or timeout ${run_timeout} s):" \
            "$(tail -n 3 "$err" | tr '\n' ' ')" | tee -a "$out"
        fi
      done
    done
  done
  exit 0
fi

# --- install ----------------------------------------------------------------------------------
missing=()
for pkg in erlang-base libcaf-dev libgrpc++-dev protobuf-compiler-grpc libzmq3-dev; do
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

# --- build --------------------------------------------------------------------------------------
mkdir -p "$build_dir"
log=$build_dir/build.log
: >"$log"
# Runs a build step at nice 19 under the lock, its output in build.log; shows the log on failure.
build() {
  if ! locked nice -n 19 "$@" >>"$log" 2>&1; then
    echo "run.sh: build step failed: $*" >&2
    tail -n 30 "$log" >&2
    exit 1
  fi
}
# A build tree configured from another checkout cannot be reused (CMake refuses a second source);
# the trees under $build_dir are this script's own, so such a tree starts over.
own_tree() {
  local tree=$1 source=$2
  if [[ -f $tree/CMakeCache.txt ]] &&
    ! grep -qxF "CMAKE_HOME_DIRECTORY:INTERNAL=$source" "$tree/CMakeCache.txt"; then
    echo "run.sh: $tree was configured from another checkout; building it afresh" >&2
    rm -rf "$tree"
  fi
}
[[ -n $lock ]] && echo "building under $lock (waits for it, at most $lock_wait s)..." >&2
if [[ -z $troupe_prefix ]]; then
  troupe_prefix=$build_dir/troupe-prefix
  own_tree "$build_dir/troupe-build" "$source_dir"
  build cmake -S "$source_dir" -B "$build_dir/troupe-build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_COMPILER=g++ -DTROUPE_BUILD_TESTS=OFF -DTROUPE_BUILD_BENCHMARKS=OFF \
    -DTROUPE_BUILD_EXAMPLES=OFF -DTROUPE_UNITY_BUILD=ON
  build cmake --build "$build_dir/troupe-build" -j2
  rm -rf "$troupe_prefix"
  build cmake --install "$build_dir/troupe-build" --prefix "$troupe_prefix"
fi
own_tree "$build_dir/troupe-programs" "$here/troupe"
build cmake -S "$here/troupe" -B "$build_dir/troupe-programs" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_COMPILER=g++ "-DCMAKE_PREFIX_PATH=$troupe_prefix"
build cmake --build "$build_dir/troupe-programs" -j2
# CAF 0.17.6 builds as C++20 with g++ 12.
build g++ -O2 -std=c++20 -I "$source_dir" -I "$here" -o "$build_dir/caf_compare" \
  "$here/caf_compare.cc" -lcaf_io -lcaf_core -pthread
build g++ -O2 -std=c++20 -I "$here" -o "$build_dir/zmq_compare" "$here/zmq_compare.cc" -lzmq
mkdir -p "$build_dir/grpc"
build protoc -I "$here/grpc" "--cpp_out=$build_dir/grpc" "--grpc_out=$build_dir/grpc" \
  --plugin=protoc-gen-grpc="$(command -v grpc_cpp_plugin)" "$here/grpc/grpc_compare.proto"
read -r -a grpc_flags <<<"$(pkg-config --cflags --libs grpc++ protobuf)"
build g++ -O2 -std=c++17 -I "$build_dir/grpc" -I "$here" -o "$build_dir/grpc_compare" \
  "$here/grpc/grpc_compare.cc" "$build_dir/grpc/grpc_compare.pb.cc" \
  "$build_dir/grpc/grpc_compare.grpc.pb.cc" "${grpc_flags[@]}" -pthread

otp=$(erl -noshell -eval 'io:format("~s", [erlang:system_info(otp_release)]), halt().')
version() { dpkg-query -W -f='${Version}' "$1"; }
caf_short=$(version libcaf-dev | cut -d. -f1,2)
grpc_short=$(version libgrpc++-dev | cut -d. -f1,2)
zmq_short=$(version libzmq3-dev | cut -d. -f1,2)
commit=$(git -C "$source_dir" rev-parse --short HEAD 2>/dev/null || echo unknown)
echo "Troupe $commit (installed from ${COMPARE_TROUPE_PREFIX:-this tree} into $troupe_prefix)," \
  "Erlang/OTP $otp ($(version erlang-base)), CAF $(version libcaf-dev)," \
  "gRPC $(version libgrpc++-dev), ZeroMQ $(version libzmq3-dev), $(g++ --version | head -n 1)," \
  "$(nproc) cores, $(date -u +%F), runs=$runs workloads=${selected[*]}"
echo "sizes: events=$events actors=$actors leaves=$leaves pingpong=$pingpong hops=$hops" \
  "rtt=$rtt stream=$stream stream_big=$stream_big"

# --- measure ------------------------------------------------------------------------------------
raw=$build_dir/raw.txt
if [[ -n $lock ]]; then
  echo "waiting for $lock (at most $lock_wait s)..." >&2
else
  echo "WARNING: no lock, for a quick check only" >&2
fi
locked bash "$0" --measure "$raw"

# --- the table ----------------------------------------------------------------------------------
# median FRAMEWORK WORKLOAD KEY: the median over the runs of KEY (empty when no run gave it).
median() {
  grep -E "^run [0-9]+ $1 $2 " "$raw" | grep -oE "(^| )$3=[-0-9.e+]+" | cut -d= -f2 |
    sort -g | awk '
      { v[NR] = $1 }
      END {
        if (NR == 0) { exit }
        printf "%.10g\n", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
      }'
}

# row WORKLOAD KEY SCALE FORMAT BETTER LABEL: one table row; BETTER is "high" (rates: the last
# column is Troupe / best peer) or "low" (times, memory: best peer / Troupe as "N× faster" or
# "N× less", or Troupe / best peer as "N× slower" or "N× more" when the best peer is ahead).
row() {
  local workload=$1 key=$2 scale=$3 format=$4 better=$5 label=$6 cells="" framework value
  local best="" troupe=""
  for framework in "${frameworks[@]}"; do
    if [[ " ${runs_on[$workload]} " != *" $framework "* ]]; then
      cells+=" — |"
      continue
    fi
    value=$(median "$framework" "$workload" "$key")
    if [[ -z $value ]]; then
      cells+=" failed |"
      continue
    fi
    cells+=" $(awk -v v="$value" -v s="$scale" -v f="$format" 'BEGIN { printf f, v / s }') |"
    if [[ $framework == troupe ]]; then
      troupe=$value
    elif [[ -z $best ]] || awk -v v="$value" -v b="$best" -v h="$better" \
      'BEGIN { exit !((h == "high") ? v > b : v < b) }'; then
      best=$value
    fi
  done
  local ratio="n/a"
  if [[ -n $troupe && -n $best ]]; then
    ratio=$(awk -v t="$troupe" -v b="$best" -v h="$better" -v k="$key" 'BEGIN {
      if (t <= 0 || b <= 0) { printf "n/a"; exit }
      if (h == "high") { printf "%.2f×", t / b; exit }
      memory = (k ~ /rss|bytes/)
      if (b >= t) { printf "%.2f× %s", b / t, memory ? "less" : "faster" }
      else { printf "%.2f× %s", t / b, memory ? "more" : "slower" }
    }')
  fi
  echo "| $label |$cells $ratio |"
}

chosen() { [[ " ${selected[*]} " == *" $1 "* ]]; }
mega() { awk -v v="$1" 'BEGIN { printf "%g", v / 1e6 }'; }

echo
echo "Median of $runs runs each ($(date -u +%F), Troupe at $commit):"
echo
echo "| workload | CAF $caf_short | Erlang/OTP $otp | gRPC $grpc_short | ZeroMQ $zmq_short | Troupe | Troupe / best peer |"
echo "|---|---:|---:|---:|---:|---:|---:|"
chosen rtt && row rtt rtt_us 1 "%.1f" low "remote round trip, two processes (µs)"
chosen stream64 && row stream64 events_per_s 1e6 "%.2f M" high \
  "remote 64 B events/s, one connection, one sender → one receiver"
chosen stream64k && row stream64k gb_per_s 1 "%.2f" high \
  "remote 64 KiB events, one connection (GB/s)"
chosen skynet && row skynet ms 1 "%.0f" low "skynet, $(mega "$leaves") M leaves (ms)"
chosen fanin && row fanin events_per_s 1e6 "%.2f M" high \
  "fan-in 4 → 1, $(mega "$events") M events, no flow control (events/s)"
chosen fanin && row fanin peak_rss_growth_mib 1 "%.0f MiB" low "peak RSS growth of that fan-in"
chosen pingpong && row pingpong rt_per_s 1e6 "%.2f M" high "local ping-pong, one pair (round trips/s)"
chosen ring && row ring hops_per_s 1e6 "%.2f M" high "ring of 1,000 actors, one token (hops/s)"
chosen idle && row idle bytes_per_actor 1 "%.0f B" low "bytes per idle actor, $(mega "$actors") M alive"
exit 0
