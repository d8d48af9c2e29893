# SPDX-License-Identifier: Apache-2.0
# troupe_add_benchmark(NAME name SOURCES ... DEPS ... [OUTPUT_DIRECTORY dir])
# Builds one Google Benchmark binary (with benchmark_main) into `dir` (default: the current binary
# directory), and, when tests are built, registers its smoke run with CTest: the binary once with
# --benchmark_min_time=0.01 as test `<name>_smoke`, labels bench;smoke, so CI catches a benchmark
# that crashes, hangs or fails to set up. Never a performance gate (STYLE.md §8).
function(troupe_add_benchmark)
  cmake_parse_arguments(ARG "" "NAME;OUTPUT_DIRECTORY" "SOURCES;DEPS" ${ARGN})
  if(NOT ARG_OUTPUT_DIRECTORY)
    set(ARG_OUTPUT_DIRECTORY "${CMAKE_CURRENT_BINARY_DIR}")
  endif()
  add_executable(${ARG_NAME} ${ARG_SOURCES})
  set_target_properties(${ARG_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY "${ARG_OUTPUT_DIRECTORY}")
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS} benchmark::benchmark
                                            benchmark::benchmark_main)
  if(TROUPE_BUILD_TESTS)
    add_test(NAME ${ARG_NAME}_smoke COMMAND ${ARG_NAME} --benchmark_min_time=0.01)
    set_tests_properties(${ARG_NAME}_smoke PROPERTIES LABELS "bench;smoke" TIMEOUT 300)
  endif()
endfunction()
