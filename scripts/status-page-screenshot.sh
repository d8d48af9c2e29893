#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Loads a running node's status page in headless Chromium and takes a screenshot: the browser
# check of the page that MonitoringServer serves at `/` (node/monitoring.h).
#
#   scripts/status-page-screenshot.sh [BUILD_DIR [OUT_DIR]]
#
# Starts a two-node troupe_cluster from BUILD_DIR/examples (default build/release) under load, for
# long enough that it outlives both Chromium runs on a loaded machine (it is stopped as soon as they
# are done), waits for node 1's status page URL and for node 1 to be ready (GET /readyz 200: a
# session with every member, node 2 among them), has Chromium (Debian's `chromium`; as root it needs
# --no-sandbox) render `/` into OUT_DIR/status.png (default BUILD_DIR/status-page) and dump its
# DOM, then checks that the page shows node 1, its pools and a peer whose session is up, that the
# PNG is one, and that the cluster's --prometheus_targets file lists node 1. Exits 0 when all holds. Every wait is bounded; only the cluster it started is
# stopped, by its PID.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build/release}
out=${2:-$build/status-page}
cluster="$build/examples/troupe_cluster"
browser=$(command -v chromium || true)
[[ -x "$cluster" ]] || { echo "status-page: no $cluster (build the examples first)" >&2; exit 2; }
[[ -n "$browser" ]] || { echo "status-page: no chromium on PATH (scripts/setup.sh installs it)" >&2; exit 2; }
rm -rf "$out"
mkdir -p "$out"

"$cluster" --nodes=2 --seconds=200 --window=64 --workdir="$out/cluster" \
  --prometheus_targets="$out/targets.json" >"$out/cluster.out" 2>&1 &
cluster_pid=$!
cleanup() {
  if kill -0 "$cluster_pid" 2>/dev/null; then
    kill -TERM "$cluster_pid" 2>/dev/null || true
    wait "$cluster_pid" 2>/dev/null || true
  fi
}
trap cleanup EXIT

port=""
for _ in $(seq 1 300); do  # up to 30 s for the cluster to print node 1's status page URL
  port=$(grep -o '^troupe_cluster: node 1: status http://127.0.0.1:[0-9]*' "$out/cluster.out" \
    2>/dev/null | grep -o '[0-9]*$' || true)
  [[ -n "$port" ]] && break
  sleep 0.1
done
[[ -n "$port" ]] || { echo "status-page: the cluster printed no status page URL" >&2; cat "$out/cluster.out" >&2; exit 1; }
url="http://127.0.0.1:$port/"
# GET PATH through bash's /dev/tcp (no curl on a bare Debian), at most 2 s: the status line, the
# headers and the body.
get() {
  timeout 2 bash -c 'exec 3<>"/dev/tcp/127.0.0.1/$1" && printf "GET %s HTTP/1.0\r\n\r\n" "$2" >&3 && cat <&3' \
    _ "$port" "$1" 2>/dev/null || true
}
ready=""
for _ in $(seq 1 300); do  # up to 30 s for node 1 to be ready: its session with node 2 up
  get /readyz | head -n 1 | grep -q '^HTTP/1\.[01] 200' && { ready=yes; break; }
  sleep 0.1
done
[[ -n "$ready" ]] || { echo "status-page: node 1 not ready in 30 s: $(get /readyz | tail -n 1)" >&2; cat "$out/cluster.out" >&2; exit 1; }

flags=(--headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1200,800)
timeout 60 "$browser" "${flags[@]}" --screenshot="$out/status.png" "$url" >"$out/chromium.log" 2>&1
timeout 60 "$browser" "${flags[@]}" --dump-dom "$url" >"$out/status.html" 2>>"$out/chromium.log"
if ! kill -0 "$cluster_pid" 2>/dev/null; then
  echo "status-page: the cluster ended before Chromium was done; the page may be an error page" >&2
  cat "$out/cluster.out" >&2
  exit 1
fi

for want in 'Troupe node 1' '<h2>Pools</h2>' '<td>User</td>' '<td>node 2</td><td>up</td>' \
  '<h2>Busiest actor classes</h2>'; do
  if ! grep -qF "$want" "$out/status.html"; then
    echo "status-page: the page Chromium rendered lacks '$want' (see $out/status.html)" >&2
    exit 1
  fi
done
# The Prometheus file_sd list names node 1's monitoring address.
if ! grep -qF "\"127.0.0.1:$port\"" "$out/targets.json" 2>/dev/null; then
  echo "status-page: $out/targets.json lacks node 1's 127.0.0.1:$port" >&2
  exit 1
fi
if [[ "$(head -c 4 "$out/status.png" | od -An -tx1 | tr -d ' \n')" != "89504e47" ]]; then
  echo "status-page: $out/status.png is not a PNG" >&2
  exit 1
fi
echo "status-page: screenshot $out/status.png ($(stat -c %s "$out/status.png") bytes), DOM $out/status.html"
