#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Installs what is missing, builds Troupe in Release and runs the demo: ping-pong between actors
# on one node, printing round trips per second. Extra arguments go to the demo binary.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release -j2 --target ping_pong
./build/release/examples/ping_pong --seconds=3 "$@"
