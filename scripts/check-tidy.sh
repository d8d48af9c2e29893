#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Runs clang-tidy (the repo's .clang-tidy) over the library sources with every warning as an
# error. Needs the generated protobuf headers, so it configures a clang tree and builds those.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build/tidy
cmake -S . -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=Debug -DTROUPE_BUILD_TESTS=OFF -DTROUPE_BUILD_BENCHMARKS=OFF \
  -DTROUPE_BUILD_EXAMPLES=OFF >/dev/null
cmake --build "$build" --target troupe_proto >/dev/null
mapfile -t sources < <(git ls-files 'actors/*.cc' 'interconnect/*.cc')
printf '%s\n' "${sources[@]}" |
  xargs -P 2 -n 1 clang-tidy -p "$build" --quiet --warnings-as-errors='*' 2>/dev/null
echo "tidy: ${#sources[@]} files clean"
