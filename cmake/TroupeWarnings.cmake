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
  add_link_options(${_troupe_san})
endif()
