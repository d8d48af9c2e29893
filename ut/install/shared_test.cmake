# SPDX-License-Identifier: Apache-2.0
# BUILD_SHARED_LIBS: configures the source tree as a second, shared build that makes only what is
# installed (the libraries and the three programs: no tests, benchmarks, other examples or
# GoogleTest components; a unity build, through the compiler launcher, so a warm ccache makes it
# a few seconds of linking), installs it into a fresh prefix and checks it as a user would:
# - lib/: every library a libtroupe_<name>.so.<version> with its SONAME link, and no archive;
# - bin/: the programs run from the prefix without LD_LIBRARY_PATH (their RUNPATH is relative,
#   $ORIGIN/../lib) and troupe_cluster runs two nodes and troupe_loadgen for a second;
# - consumer/ (its nodes, without the testing component) built and run with OpenSSL and
#   pkg-config (so cpp-httplib) unfindable: a shared troupe::node needs neither at link time;
#   actors_only/ likewise, without GoogleTest;
# - pkg-config: troupe-node lists OpenSSL and cpp-httplib under Requires.private only.
# install_test.cmake checks the static install.
# Run with -DSOURCE_DIR=... -DWORK_DIR=... -DGENERATOR=... -DCXX_COMPILER=... -DVERSION=...
# -DLIBDIR=... -DWERROR=... [-DCXX_LAUNCHER=...]
file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")
include("${CMAKE_CURRENT_LIST_DIR}/install_util.cmake")

set(build "${WORK_DIR}/build")
run(${CMAKE_COMMAND} -S "${SOURCE_DIR}" -B "${build}" -G "${GENERATOR}"
    -DCMAKE_CXX_COMPILER=${CXX_COMPILER} -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON
    -DTROUPE_UNITY_BUILD=ON -DTROUPE_WERROR=${WERROR} -DTROUPE_BUILD_TESTS=OFF
    -DTROUPE_BUILD_BENCHMARKS=OFF -DTROUPE_BUILD_EXAMPLES=ON -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON)
# A cold ccache compiles every library: allow for it.
run_within(1200 ${CMAKE_COMMAND} --build "${build}" -j2 --target troupe_node troupe_loadgen
           troupe_cluster)
run(${CMAKE_COMMAND} --install "${build}" --prefix "${prefix}")

# -- the installed libraries ----------------------------------------------------------------------
string(REGEX MATCH "^[0-9]+\\.[0-9]+" soversion "${VERSION}")
if(soversion MATCHES "^0\\.")
  set(soname_version "${soversion}")
else()
  string(REGEX MATCH "^[0-9]+" soname_version "${VERSION}")
endif()
foreach(library proto actors interconnect interconnect_testing node)
  foreach(file "libtroupe_${library}.so" "libtroupe_${library}.so.${soname_version}"
               "libtroupe_${library}.so.${VERSION}")
    if(NOT EXISTS "${prefix}/${LIBDIR}/${file}")
      message(FATAL_ERROR "${LIBDIR}/${file} is not installed")
    endif()
  endforeach()
endforeach()
file(GLOB archives "${prefix}/${LIBDIR}/*.a")
if(archives)
  message(FATAL_ERROR "a shared install holds archives: ${archives}")
endif()

check_programs()

# -- consumers ------------------------------------------------------------------------------------
build_consumer(consumer "${here}/consumer" -DCONSUMER_TESTING=OFF
               -DCMAKE_DISABLE_FIND_PACKAGE_OpenSSL=ON -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON
               --no-warn-unused-cli)
run("${WORK_DIR}/consumer/consumer")
run("${WORK_DIR}/consumer/consumer_cluster")
run("${WORK_DIR}/consumer/consumer_node")
check_actors_only()

expect_pkg_config_without_private(troupe-node)
pkg_config(troupe-node --libs --static)
if(NOT pkg_config_output MATCHES "-lssl" OR NOT pkg_config_output MATCHES "-lcpp-httplib")
  message(FATAL_ERROR "pkg-config --libs --static troupe-node names no -lssl or -lcpp-httplib: "
                      "${pkg_config_output}")
endif()
