# SPDX-License-Identifier: Apache-2.0
# Installs the build tree (static libraries) into a fresh prefix, checks what landed there, then
# builds and runs projects that use it, as users' projects would:
# - <prefix>/bin: troupe_node, troupe_loadgen and troupe_cluster answer --version with the version
#   and commit, and the installed troupe_cluster runs two installed troupe_node processes and
#   troupe_loadgen for a second;
# - consumer/: an actor program that checks the installed actors/version.h against
#   troupe::Version(), a GoogleTest test on troupe::testing (COMPONENTS testing) and two nodes over
#   loopback TCP, whose Undelivered reason goes through absl::StrCat (Debian's abseil has its own
#   absl::string_view, so the name must not be a std::string_view), and one troupe::node::Node
#   with its monitoring server, its config read by troupe::node::ParseConfig;
# - actors_only/: troupe::actors alone, configured with GoogleTest, OpenSSL and pkg-config (so
#   cpp-httplib) made unfindable: COMPONENTS actors needs none of them;
# - a static troupe::interconnect without OpenSSL must fail the find naming OpenSSL (its archive's
#   link line needs it);
# - pkg-config: consumer_node.cc compiled and linked by a plain compiler command with
#   `pkg-config --cflags --libs troupe`, and run; troupe-actors names no OpenSSL, xxHash or
#   cpp-httplib;
# - proto_events/: its own .proto compiled by the exported troupe_protobuf_library(), sent as an
#   EventPB between actors;
# - examples/ of the source tree, built standalone (examples/README.md) as a user who copies it
#   would, then smoke-run: ping_pong for a second, client_server (two nodes configured in code,
#   request/reply, graceful shutdown), and troupe_cluster with two troupe_node processes and
#   troupe_loadgen, which it finds next to itself in that build directory;
# - components/: an unknown component must fail the configure.
# shared_test.cmake does the same for a BUILD_SHARED_LIBS build.
# Every command has a time limit (the test's own TIMEOUT bounds the sum). Consumers compile through
# the build's compiler launcher (ccache) when it has one.
# Run with -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=... -DGENERATOR=... -DCXX_COMPILER=...
# -DVERSION=... -DLIBDIR=... [-DCXX_LAUNCHER=...]
file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")
include("${CMAKE_CURRENT_LIST_DIR}/install_util.cmake")

run(${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${prefix}")

# -- the installed tree ---------------------------------------------------------------------------
# A shared prefix such as /usr/local must get one directory of ours under include/, nothing else.
file(GLOB entries RELATIVE "${prefix}/include" LIST_DIRECTORIES true "${prefix}/include/*")
if(NOT entries STREQUAL "troupe")
  message(FATAL_ERROR "${prefix}/include must hold exactly one entry, troupe/; it holds: "
                      "[${entries}]. Every installed header belongs under include/troupe/ "
                      "(cmake/TroupeInstall.cmake).")
endif()
foreach(header actors/actor.h actors/version.h interconnect/interconnect.h node/node.h
               proto/config.pb.h proto/events.proto)
  if(NOT EXISTS "${prefix}/include/troupe/${header}")
    message(FATAL_ERROR "include/troupe/${header} is not installed")
  endif()
endforeach()
# Private headers stay out, except the two public headers include (actors/internal/README.md).
file(GLOB_RECURSE internal_headers RELATIVE "${prefix}/include/troupe"
     "${prefix}/include/troupe/*/internal/*")
list(SORT internal_headers)
set(allowed actors/internal/mailbox_node.h actors/internal/small_alloc.h)
if(NOT internal_headers STREQUAL allowed)
  message(FATAL_ERROR "installed internal headers are [${internal_headers}], expected "
                      "[${allowed}]")
endif()

# -- programs -------------------------------------------------------------------------------------
check_programs()

# -- consumers ------------------------------------------------------------------------------------
build_consumer(consumer "${here}/consumer")
run("${WORK_DIR}/consumer/consumer")
run("${WORK_DIR}/consumer/consumer_test")
run("${WORK_DIR}/consumer/consumer_cluster")
run("${WORK_DIR}/consumer/consumer_node")

check_actors_only()
expect_find_failure(interconnect "\"interconnect\" needs[^\"]*\"OpenSSL\""
                    -DCMAKE_DISABLE_FIND_PACKAGE_OpenSSL=ON)

# pkg-config, with no CMake: the whole runtime for a node, and what troupe-actors leaves out.
# Compiled and linked in two commands: the launcher (ccache) caches a compile, not a link.
pkg_config(troupe --cflags)
separate_arguments(cflags UNIX_COMMAND "${pkg_config_output}")
pkg_config(troupe --libs)
separate_arguments(libs UNIX_COMMAND "${pkg_config_output}")
run(${CXX_LAUNCHER} ${CXX_COMPILER} -std=c++20 -O1 ${cflags} -c "${here}/consumer/consumer_node.cc"
    -o "${WORK_DIR}/pkg_config_node.o")
run(${CXX_COMPILER} "${WORK_DIR}/pkg_config_node.o" ${libs} -o "${WORK_DIR}/pkg_config_node")
run("${WORK_DIR}/pkg_config_node")
expect_pkg_config_without_private(troupe-actors)

build_consumer(proto_events "${here}/proto_events")
run("${WORK_DIR}/proto_events/proto_events")

# The examples as a user's project (examples/README.md, "Building the examples on their own").
build_consumer(examples "${SOURCE_DIR}/examples")
run_within(30 "${WORK_DIR}/examples/ping_pong" --pairs=1 --seconds=1)
run_within(60 "${WORK_DIR}/examples/client_server" --requests=1000)
# About 3 s: start-up, a second of load, the nodes' shutdown (SIGKILL after 5 s if one hangs).
run_within(60 "${WORK_DIR}/examples/troupe_cluster" --nodes=2 --seconds=1
           "--workdir=${WORK_DIR}/examples/cluster")

expect_find_failure("actors;no_such_component" "no_such_component")
