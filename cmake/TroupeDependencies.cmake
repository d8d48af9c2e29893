# SPDX-License-Identifier: Apache-2.0
# Dependencies, all from Debian 12 packages (scripts/setup.sh installs them).
find_package(Threads REQUIRED)
find_package(absl REQUIRED)
find_package(Protobuf REQUIRED)

if(TROUPE_BUILD_TESTS)
  find_package(GTest REQUIRED)
else()
  # troupe::testing (the deterministic test runtime, for users' tests too) needs it.
  find_package(GTest QUIET)
endif()
if(TROUPE_BUILD_BENCHMARKS)
  find_package(benchmark REQUIRED)
endif()

# cpp-httplib (libcpp-httplib-dev): the monitoring server's HTTP. Debian ships a compiled library
# with a pkg-config file and no CMake config; its compile definitions (OpenSSL, zlib, brotli
# support) change the library's class layouts, so it is used only through the pkg-config target.
find_package(PkgConfig REQUIRED)
pkg_check_modules(TROUPE_HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)

# Standalone Asio is header-only and ships no CMake config: wrap it in an imported target.
find_path(TROUPE_ASIO_INCLUDE_DIR asio.hpp)
if(TROUPE_ASIO_INCLUDE_DIR AND NOT TARGET troupe_asio)
  add_library(troupe_asio INTERFACE IMPORTED)
  target_include_directories(troupe_asio INTERFACE "${TROUPE_ASIO_INCLUDE_DIR}")
  target_compile_definitions(troupe_asio INTERFACE ASIO_STANDALONE ASIO_NO_DEPRECATED)
  target_link_libraries(troupe_asio INTERFACE Threads::Threads)
endif()

# xxHash (libxxhash-dev): XXH3 checksums of interconnect frames. Debian ships no CMake config:
# wrap it in an imported target.
find_path(TROUPE_XXHASH_INCLUDE_DIR xxhash.h REQUIRED)
find_library(TROUPE_XXHASH_LIBRARY xxhash REQUIRED)
if(NOT TARGET troupe_xxhash)
  add_library(troupe_xxhash UNKNOWN IMPORTED)
  set_target_properties(troupe_xxhash PROPERTIES
    IMPORTED_LOCATION "${TROUPE_XXHASH_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${TROUPE_XXHASH_INCLUDE_DIR}")
endif()
