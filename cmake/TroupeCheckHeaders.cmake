# SPDX-License-Identifier: Apache-2.0
# troupe_check_headers(TARGET name DEPS lib HEADERS h1 h2 ...): compiles one translation unit per
# header that includes only that header, so a public header that does not compile alone fails the
# build (STYLE.md: headers must compile alone).
function(troupe_check_headers)
  cmake_parse_arguments(ARG "" "TARGET" "DEPS;HEADERS" ${ARGN})
  if(NOT TROUPE_CHECK_HEADERS)
    return()
  endif()
  set(sources)
  foreach(header ${ARG_HEADERS})
    string(MAKE_C_IDENTIFIER "${header}" id)
    set(source "${CMAKE_CURRENT_BINARY_DIR}/check_headers/${id}.cc")
    file(GENERATE OUTPUT "${source}" CONTENT "#include \"${header}\"  // NOLINT\n")
    list(APPEND sources "${source}")
  endforeach()
  add_library(${ARG_TARGET} OBJECT ${sources})
  target_link_libraries(${ARG_TARGET} PRIVATE ${ARG_DEPS} troupe::internal)
  # One header a translation unit, even in a unity build: batched, a header missing an include
  # would borrow it from the one before.
  set_target_properties(${ARG_TARGET} PROPERTIES UNITY_BUILD OFF)
endfunction()
