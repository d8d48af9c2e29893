#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Runs clang-tidy (the repo's .clang-tidy) over the library sources with every warning as an
# error. Needs the generated protobuf headers, so it configures a clang tree and builds those.
#
# A file found clean is remembered in a cache (TROUPE_TIDY_CACHE, default ~/.cache/troupe-tidy)
# under a key made of the file's content and everything else that can change the verdict: the
# clang-tidy version, .clang-tidy, every header, .proto and CMake file of the tree, and the
# versions of the Debian packages whose headers the sources include. A clean clone of a tree that
# was checked before is then checked in seconds; any change to a header checks every file again.
# TROUPE_TIDY_CACHE=off checks every file.
set -euo pipefail
cd "$(dirname "$0")/.."
build=build/tidy
cmake -S . -B "$build" -G Ninja -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=Debug -DTROUPE_BUILD_TESTS=OFF -DTROUPE_BUILD_BENCHMARKS=OFF \
  -DTROUPE_BUILD_EXAMPLES=OFF >/dev/null
cmake --build "$build" --target troupe_proto >/dev/null
mapfile -t sources < <(git ls-files 'actors/*.cc' 'interconnect/*.cc' 'node/*.cc')

cache=${TROUPE_TIDY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/troupe-tidy}
todo=("${sources[@]}")
if [[ "$cache" != off ]]; then
  mkdir -p "$cache"
  common=$({
    clang-tidy --version
    cat .clang-tidy
    git ls-files -z '*.h' '*.proto' '*CMakeLists.txt' 'cmake/*' | xargs -0 sha256sum
    dpkg-query -W libabsl-dev libprotobuf-dev libasio-dev libssl-dev libcpp-httplib-dev \
      libxxhash-dev libstdc++-12-dev 2>/dev/null || true
  } | sha256sum | cut -d' ' -f1)
  todo=()
  keys=()
  for source in "${sources[@]}"; do
    key=$({
      echo "$common $source"
      cat "$source"
    } | sha256sum | cut -d' ' -f1)
    if [[ ! -e "$cache/$key" ]]; then
      todo+=("$source")
      keys+=("$key")
    fi
  done
fi
echo "tidy: ${#todo[@]} of ${#sources[@]} files to check ($((${#sources[@]} - ${#todo[@]})) found clean before)"
if [[ ${#todo[@]} -gt 0 ]]; then
  for i in "${!todo[@]}"; do
    printf '%s\0%s\0' "${todo[$i]}" "${keys[$i]:-}"
  done |
    xargs -0 -P 2 -n 2 bash -c '
      clang-tidy -p "$0" --quiet --warnings-as-errors="*" "$2" 2>/dev/null || exit 1
      if [[ -n "$3" && "$1" != off ]]; then : >"$1/$3"; fi
    ' "$build" "$cache" || { echo "tidy: clang-tidy found problems (above)" >&2; exit 1; }
fi
echo "tidy: ${#sources[@]} files clean"
