#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Runs clang-tidy (the repo's .clang-tidy) over the library sources with every warning as an
# error. Needs the generated protobuf headers, so it configures a clang tree and builds those.
#
# The tree is a unity build (TROUPE_UNITY_BUILD), and clang-tidy checks each batch of up to 8
# sources as one translation unit: most of the time goes into parsing and matching the same
# Protobuf, Asio and abseil headers, which a batch does once instead of once a file. A source's
# findings are reported at its own file and line (.clang-tidy's HeaderFilterRegex covers every
# layer's folder); bugprone-suspicious-include is off for the batch files, whose very job is to
# include .cc files. A source in no batch is checked alone.
#
# A batch found clean is remembered in a cache (TROUPE_TIDY_CACHE, default ~/.cache/troupe-tidy)
# under a key made of its files' content and everything else that can change the verdict: the
# clang-tidy version, .clang-tidy, every header, .proto and CMake file of the tree, and the
# versions of the Debian packages whose headers the sources include. A clean clone of a tree that
# was checked before is then checked in seconds; any change to a header checks every batch again.
# TROUPE_TIDY_CACHE=off checks everything.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build/tidy
cmake -S . -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=Debug -DTROUPE_BUILD_TESTS=OFF -DTROUPE_BUILD_BENCHMARKS=OFF \
  -DTROUPE_BUILD_EXAMPLES=OFF -DTROUPE_UNITY_BUILD=ON >/dev/null
cmake --build "$build" --target troupe_proto >/dev/null
mapfile -t sources < <(git ls-files 'actors/*.cc' 'interconnect/*.cc' 'node/*.cc')

# units[i]: what clang-tidy is given (a batch file of the tree, or a source); members[i]: the
# sources it checks, space-separated, relative to the tree.
units=()
members=()
declare -A covered=()
root=$(pwd)
while IFS= read -r batch; do
  included=$(sed -nE 's|^#include "'"$root"'/(.*)"$|\1|p' "$batch" | tr '\n' ' ')
  kept=""
  for source in $included; do
    if printf '%s\n' "${sources[@]}" | grep -qxF "$source"; then
      kept+="$source "
      covered[$source]=1
    fi
  done
  if [[ -n "$kept" ]]; then
    units+=("$batch")
    members+=("$kept")
  fi
done < <(find "$build" -path '*/Unity/unity_*_cxx.cxx' | sort)
for source in "${sources[@]}"; do
  if [[ -z "${covered[$source]:-}" ]]; then
    units+=("$source")
    members+=("$source")
  fi
done

cache=${TROUPE_TIDY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/troupe-tidy}
todo=()
keys=()
if [[ "$cache" != off ]]; then
  mkdir -p "$cache"
  common=$({
    clang-tidy --version
    cat .clang-tidy
    git ls-files -z '*.h' '*.proto' '*CMakeLists.txt' 'cmake/*' | xargs -0 sha256sum
    dpkg-query -W libabsl-dev libprotobuf-dev libasio-dev libssl-dev libcpp-httplib-dev \
      libxxhash-dev libstdc++-12-dev 2>/dev/null || true
  } | sha256sum | cut -d' ' -f1)
fi
for i in "${!units[@]}"; do
  key=""
  if [[ "$cache" != off ]]; then
    # shellcheck disable=SC2086  # members are space-separated paths without spaces
    key=$({
      echo "$common ${members[$i]}"
      cat ${members[$i]}
    } | sha256sum | cut -d' ' -f1)
    [[ -e "$cache/$key" ]] && continue
  fi
  todo+=("${units[$i]}")
  keys+=("$key")
done
echo "tidy: ${#sources[@]} files in ${#units[@]} batches; ${#todo[@]} batches to check" \
  "($((${#units[@]} - ${#todo[@]})) found clean before)"
if [[ ${#todo[@]} -gt 0 ]]; then
  for i in "${!todo[@]}"; do
    printf '%s\0%s\0' "${todo[$i]}" "${keys[$i]:-}"
  done |
    xargs -0 -P 2 -n 2 bash -c '
      checks=()
      [[ "$2" == */Unity/* ]] && checks=(--checks=-bugprone-suspicious-include)
      clang-tidy -p "$0" --config-file=.clang-tidy "${checks[@]}" --quiet \
        --warnings-as-errors="*" "$2" 2>/dev/null || exit 1
      if [[ -n "$3" && "$1" != off ]]; then : >"$1/$3"; fi
    ' "$build" "$cache" || { echo "tidy: clang-tidy found problems (above)" >&2; exit 1; }
fi
echo "tidy: ${#sources[@]} files clean"
