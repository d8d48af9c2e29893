# SPDX-License-Identifier: Apache-2.0
# Warnings, -Werror and sanitizers live in a private INTERFACE target that in-tree code links;
# consumers of the installed package never inherit them.
add_library(troupe_internal INTERFACE)
add_library(troupe::internal ALIAS troupe_internal)
target_compile_options(troupe_internal INTERFACE -Wall -Wextra -Wpedantic -Wno-unused-parameter)
if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  target_compile_options(troupe_internal INTERFACE -Wthread-safety)
endif()
if(TROUPE_WERROR)
  target_compile_options(troupe_internal INTERFACE -Werror)
endif()

if(TROUPE_SANITIZE)
  set(_troupe_san "-fsanitize=${TROUPE_SANITIZE}")
  # Sanitizers must reach every object (abseil's inline code, gtest), so they are global here.
  add_compile_options(${_troupe_san} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND TROUPE_SANITIZE MATCHES "undefined")
    # GCC 12's vptr check miscompiles calls through pointers to member functions (every state
    # function dispatch) into a false "member access within null pointer"; clang's is sound.
    add_compile_options(-fno-sanitize=vptr)
  endif()
  add_link_options(${_troupe_san})
endif()

# troupe_add_warnings(DIRECTORY dir): links troupe::internal into every executable and library
# that `dir` (or a folder below it) defines, except protobuf libraries whose sources are all
# generated (.pb.cc, .pb.h), which get no warning flags anywhere in the tree. For folders that
# build as users' projects would and so name no private target themselves (examples/); call it
# after add_subdirectory(dir).
function(troupe_add_warnings)
  cmake_parse_arguments(ARG "" "DIRECTORY" "" ${ARGN})
  get_property(targets DIRECTORY "${ARG_DIRECTORY}" PROPERTY BUILDSYSTEM_TARGETS)
  foreach(target ${targets})
    get_target_property(type ${target} TYPE)
    if(NOT type MATCHES "^(EXECUTABLE|(STATIC|SHARED|MODULE|OBJECT)_LIBRARY)$")
      continue()
    endif()
    get_target_property(sources ${target} SOURCES)
    list(FILTER sources EXCLUDE REGEX "\\.pb\\.(cc|h)$")
    if(sources)
      target_link_libraries(${target} PRIVATE troupe::internal)
    endif()
  endforeach()
  get_property(subdirectories DIRECTORY "${ARG_DIRECTORY}" PROPERTY SUBDIRECTORIES)
  foreach(subdirectory ${subdirectories})
    troupe_add_warnings(DIRECTORY "${subdirectory}")
  endforeach()
endfunction()
