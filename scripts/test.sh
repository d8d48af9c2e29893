#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# Installs what is missing, then builds and runs every test in three builds:
#   release  gcc, Release: every label (unit, integration, timing, slow), the install/find_package
#            consumer test, benchmark smoke runs
#   asan     gcc, AddressSanitizer + UndefinedBehaviorSanitizer, without label `timing`
#   tsan     clang, ThreadSanitizer, without label `timing`
# Label `timing` marks tests that check real-time windows (see ut/README.md): a sanitizer's
# slowdown is not what they measure, so they run in the Release build only.
# Choose builds with TROUPE_TEST_BUILDS="release tsan" (default: all three). Ends with one line
# "tests: N passed, M failed".
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
builds=${TROUPE_TEST_BUILDS:-release asan tsan}
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
      compilers=(-DCMAKE_CXX_COMPILER=g++)
      options=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DTROUPE_SANITIZE=address,undefined
               -DTROUPE_BUILD_BENCHMARKS=OFF)
      labels=(-LE timing)
      ;;
    tsan)
      compilers=(-DCMAKE_CXX_COMPILER=clang++)
      options=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DTROUPE_SANITIZE=thread
               -DTROUPE_BUILD_BENCHMARKS=OFF)
      labels=(-LE timing)
      ;;
    *)
      echo "test: unknown build '$build' (expected release, asan, tsan)" >&2
      exit 2
      ;;
  esac
  echo "=== $build: configure and build"
  cmake -S . -B "build/$build" -G Ninja "${compilers[@]}" "${options[@]}" -DTROUPE_WERROR=ON \
    >/dev/null
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
