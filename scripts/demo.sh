#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Installs what is missing, builds Troupe in Release and runs the demos: ping-pong between actors
# on one node (round trips per second), then a local cluster (examples/troupe_cluster): three
# troupe_node processes and a load generator exchanging events over loopback TCP, ending with a
# table of throughput and round-trip times per pair, and a report with plots in
# build/release/load-report/report.html. Extra arguments go to troupe_cluster.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release -j2 --target ping_pong troupe_cluster
./build/release/examples/ping_pong --seconds=2
echo
./build/release/examples/troupe_cluster --nodes=3 --seconds=5 --report=build/release/load-report "$@"
