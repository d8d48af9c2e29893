# SPDX-License-Identifier: Apache-2.0
# Build options. Tests, benchmarks and examples default to ON only when Troupe is the top-level
# project, so a parent project that add_subdirectory()s us builds just the libraries.
set(_troupe_top OFF)
if(CMAKE_SOURCE_DIR STREQUAL PROJECT_SOURCE_DIR)
  set(_troupe_top ON)
endif()

option(TROUPE_BUILD_TESTS "Build the unit and integration tests" ${_troupe_top})
option(TROUPE_BUILD_BENCHMARKS "Build the Google Benchmark binaries" ${_troupe_top})
option(TROUPE_BUILD_EXAMPLES "Build the example programs" ${_troupe_top})
option(TROUPE_WERROR "Treat warnings as errors" OFF)
set(TROUPE_SANITIZE "" CACHE STRING "Sanitizers: empty, 'address,undefined' or 'thread'")
set(TROUPE_LOG_MIN_LEVEL "0" CACHE STRING "Compile-time log floor: 0 trace .. 4 error")
# Unity builds compile each target's sources in batches of 8 per translation unit, which parses
# the shared headers (Protobuf, Asio, abseil, GoogleTest) once a batch instead of once a file: a
# clean build takes about a third of the compile time. Rebuilding after a one-file edit compiles
# its whole batch, so it suits clean builds (CI, scripts/test.sh) more than editing.
option(TROUPE_UNITY_BUILD "Compile each target's sources in batches (faster clean builds)" OFF)
# Whether to compile every public header alone, which proves it includes what it uses. The
# verdict does not depend on the compiler's flags, so one build of several is enough.
option(TROUPE_CHECK_HEADERS "Compile each header alone (with the tests)" ON)

# Shared libraries: libtroupe_*.so with a SONAME (cmake/TroupeInstall.cmake) and default symbol
# visibility (every public symbol exported, as the static archives have it). The installed programs
# find them through a relative RPATH ($ORIGIN/../lib, relocatable with the prefix) unless the
# library directory is one the linker searches anyway (/usr/lib/...), as distributions want.
option(BUILD_SHARED_LIBS "Build Troupe's libraries shared instead of static" OFF)
if(BUILD_SHARED_LIBS)
  include(GNUInstallDirs)
  list(FIND CMAKE_CXX_IMPLICIT_LINK_DIRECTORIES "${CMAKE_INSTALL_FULL_LIBDIR}" _troupe_system_lib)
  if(_troupe_system_lib EQUAL -1)
    file(RELATIVE_PATH _troupe_bin_to_lib "${CMAKE_INSTALL_FULL_BINDIR}"
         "${CMAKE_INSTALL_FULL_LIBDIR}")
    set(CMAKE_INSTALL_RPATH "$ORIGIN/${_troupe_bin_to_lib}")
  endif()
endif()

if(NOT CMAKE_BUILD_TYPE AND NOT CMAKE_CONFIGURATION_TYPES)
  set(CMAKE_BUILD_TYPE Release CACHE STRING "Build type" FORCE)
endif()

# The shuffle debug aid (proto ShuffleConfig) is compiled into Debug and sanitizer builds.
set(_troupe_shuffle OFF)
if(CMAKE_BUILD_TYPE STREQUAL "Debug" OR TROUPE_SANITIZE)
  set(_troupe_shuffle ON)
endif()
option(TROUPE_ENABLE_SHUFFLE "Honour the shuffle config (random ready order) in this build"
       ${_troupe_shuffle})

set(CMAKE_CXX_STANDARD 20)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
set(CMAKE_CXX_EXTENSIONS OFF)
set(CMAKE_EXPORT_COMPILE_COMMANDS ON)
set(CMAKE_POSITION_INDEPENDENT_CODE ON)

# ccache with paths taken relative to the source tree, so a second checkout (a clean clone for CI, a
# git worktree) reuses what the first one compiled instead of missing on every absolute path.
find_program(TROUPE_CCACHE ccache)
if(TROUPE_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  set(CMAKE_CXX_COMPILER_LAUNCHER "${CMAKE_COMMAND}" -E env "CCACHE_BASEDIR=${CMAKE_SOURCE_DIR}"
                                  CCACHE_NOHASHDIR=1 "${TROUPE_CCACHE}")
endif()

if(TROUPE_UNITY_BUILD)
  set(CMAKE_UNITY_BUILD ON)
  set(CMAKE_UNITY_BUILD_BATCH_SIZE 8)
endif()
