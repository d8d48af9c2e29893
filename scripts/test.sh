#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Installs what is missing, then builds and runs every test in three builds:
#   release  gcc, Release: every label (unit, integration, timing, slow), the install/find_package
#            consumer test, benchmark smoke runs, every header compiled alone
#   asan     clang -O1, AddressSanitizer + UndefinedBehaviorSanitizer, without label `timing`
#   tsan     clang -O2, ThreadSanitizer, without label `timing`
# All three are unity builds (TROUPE_UNITY_BUILD): a clean build is what CI pays for. The
# sanitizer builds keep line tables only (-gline-tables-only: reports name file and line, without
# full debug info) and build neither benchmarks nor the header checks, whose verdict the Release
# build already gives. ASan builds with clang: at -O1 it compiles a test file about four times
# faster than gcc at -O2 -g, and its UBSan includes the vptr check gcc 12 cannot run.
# Label `timing` marks tests that check real-time windows (see ut/README.md): a sanitizer's
# slowdown is not what they measure, so they run in the Release build only.
# Choose builds with TROUPE_TEST_BUILDS="release tsan" (default: all three). Ends with one line
# "tests: N passed, M failed".
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
builds=${TROUPE_TEST_BUILDS:-release asan tsan}
sanitizer_options=(-DTROUPE_BUILD_BENCHMARKS=OFF -DTROUPE_CHECK_HEADERS=OFF)
passed=0
failed=0
failed_builds=()

for build in $builds; do
  case "$build" in
    release)
      compilers=(-DCMAKE_CXX_COMPILER=g++)
      options=(-DCMAKE_BUILD_TYPE=Release)
      labels=()
      ;;
    asan)
      compilers=(-DCMAKE_CXX_COMPILER=clang++)
      options=(-DCMAKE_BUILD_TYPE=RelWithDebInfo
               "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only -DNDEBUG"
               -DTROUPE_SANITIZE=address,undefined "${sanitizer_options[@]}")
      labels=(-LE timing)
      ;;
    tsan)
      compilers=(-DCMAKE_CXX_COMPILER=clang++)
      options=(-DCMAKE_BUILD_TYPE=RelWithDebInfo
               "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -gline-tables-only -DNDEBUG"
               -DTROUPE_SANITIZE=thread "${sanitizer_options[@]}")
      labels=(-LE timing)
      ;;
    *)
      echo "test: unknown build '$build' (expected release, asan, tsan)" >&2
      exit 2
      ;;
  esac
  echo "=== $build: configure and build"
  # A tree configured with another compiler (an older layout of these builds) starts afresh:
  # CMake cannot switch the compiler of an existing cache.
  cache="build/$build/CMakeCache.txt"
  compiler=${compilers[0]#-DCMAKE_CXX_COMPILER=}
  configured=$(sed -nE 's/^CMAKE_CXX_COMPILER:[A-Z]+=//p' "$cache" 2>/dev/null || true)
  if [[ -n "$configured" && "$(basename "$configured")" != "$compiler" ]]; then
    echo "test: build/$build was configured with another compiler; configuring it afresh"
    rm -rf "build/$build"
  fi
  cmake -S . -B "build/$build" -G Ninja "${compilers[@]}" "${options[@]}" -DTROUPE_WERROR=ON \
    -DTROUPE_UNITY_BUILD=ON >/dev/null
  cmake --build "build/$build" -j2
  echo "=== $build: ctest"
  log="build/$build/ctest.log"
  if ctest --test-dir "build/$build" --output-on-failure -j2 --timeout 600 "${labels[@]}" 2>&1 |
    tee "$log"; then
    :
  else
    failed_builds+=("$build")
  fi
  summary=$(grep -E 'tests passed, [0-9]+ tests failed out of [0-9]+' "$log" | tail -1 || true)
  if [[ -z "$summary" ]]; then
    echo "test: $build: ctest printed no summary" >&2
    failed_builds+=("$build")
    continue
  fi
  total=$(sed -E 's/.*out of ([0-9]+).*/\1/' <<<"$summary")
  bad=$(sed -E 's/.*tests passed, ([0-9]+) tests failed.*/\1/' <<<"$summary")
  passed=$((passed + total - bad))
  failed=$((failed + bad))
done

echo
echo "tests: $passed passed, $failed failed"
if [[ ${#failed_builds[@]} -gt 0 || $failed -gt 0 ]]; then
  echo "test: failures in: ${failed_builds[*]}" >&2
  exit 1
fi
