# SPDX-License-Identifier: Apache-2.0
# troupe_add_test(NAME name SOURCES ... DEPS ... LABELS ... TIMEOUT seconds)
# Builds one gtest binary, registers every test in it with CTest (labels, timeout, sanitizer
# environment) through gtest_discover_tests.
include(GoogleTest)

set(TROUPE_TEST_ENV
    "ASAN_OPTIONS=abort_on_error=1:detect_stack_use_after_return=1:detect_leaks=1"
    "UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1"
    "TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=${CMAKE_CURRENT_LIST_DIR}/tsan.supp")

function(troupe_add_test)
  cmake_parse_arguments(ARG "" "NAME;TIMEOUT" "SOURCES;DEPS;LABELS" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 120)
  endif()
  add_executable(${ARG_NAME} ${ARG_SOURCES})
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gmock GTest::gtest_main
                                            troupe::internal)
  gtest_discover_tests(${ARG_NAME}
    PROPERTIES LABELS "${ARG_LABELS}" TIMEOUT ${ARG_TIMEOUT} ENVIRONMENT "${TROUPE_TEST_ENV}"
    DISCOVERY_TIMEOUT 60)
endfunction()
