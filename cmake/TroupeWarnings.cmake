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
