# SPDX-License-Identifier: Apache-2.0
# Installs the build tree into a fresh prefix, checks what landed under <prefix>/include, then
# builds and runs projects that find_package(Troupe) from it, as users' projects would:
# - consumer/: an actor program, a GoogleTest test on troupe::testing (COMPONENTS testing) and two
#   nodes over loopback TCP, whose Undelivered reason goes through absl::StrCat (Debian's abseil
#   has its own absl::string_view, so the name must not be a std::string_view), and one
#   troupe::node::Node with its monitoring server, its config read by troupe::node::ParseConfig;
# - actors_only/: troupe::actors alone, configured with GoogleTest made unfindable;
# - proto_events/: its own .proto compiled by the exported troupe_protobuf_library(), sent as an
#   EventPB between actors;
# - examples/ of the source tree, built standalone (examples/README.md) as a user who copies it
#   would, then smoke-run: ping_pong for a second, client_server (two nodes configured in code,
#   request/reply, graceful shutdown), and troupe_cluster with two troupe_node processes and
#   troupe_loadgen, which it finds next to itself in that build directory;
# - components/: an unknown component must fail the configure.
# Every command has a time limit (the test's own TIMEOUT bounds the sum). Consumers compile through
# the build's compiler launcher (ccache) when it has one.
# Run with -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=... -DGENERATOR=... -DCXX_COMPILER=...
# [-DCXX_LAUNCHER=...]
file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")
set(here "${SOURCE_DIR}/ut/install")

# Runs a command; fails on a non-zero status or when it has not ended within `seconds` (the
# result then names the timeout, and a troupe_cluster's children die with it: PR_SET_PDEATHSIG).
function(run_within seconds)
  execute_process(COMMAND ${ARGN} TIMEOUT ${seconds} RESULT_VARIABLE result OUTPUT_VARIABLE out
                  ERROR_VARIABLE out)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "failed (${result}): ${ARGN}\n${out}")
  endif()
  message(STATUS "${out}")
endfunction()

# Runs an install, configure, build or a consumer that ends on its own within seconds.
function(run)
  run_within(300 ${ARGN})
endfunction()

# Configures and builds the consumer project in `dir` into WORK_DIR/<name>; extra arguments go to
# the configure step.
function(build_consumer name dir)
  set(launcher)
  if(CXX_LAUNCHER)
    set(launcher "-DCMAKE_CXX_COMPILER_LAUNCHER=${CXX_LAUNCHER}")
  endif()
  run(${CMAKE_COMMAND} -S "${dir}" -B "${WORK_DIR}/${name}" -G "${GENERATOR}"
      -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release
      -DCMAKE_CXX_COMPILER=${CXX_COMPILER} ${launcher} ${ARGN})
  run(${CMAKE_COMMAND} --build "${WORK_DIR}/${name}" -j2)
endfunction()

run(${CMAKE_COMMAND} --install "${BUILD_DIR}" --prefix "${prefix}")

# -- the installed tree ---------------------------------------------------------------------------
# A shared prefix such as /usr/local must get one directory of ours under include/, nothing else.
file(GLOB entries RELATIVE "${prefix}/include" LIST_DIRECTORIES true "${prefix}/include/*")
if(NOT entries STREQUAL "troupe")
  message(FATAL_ERROR "${prefix}/include must hold exactly one entry, troupe/; it holds: "
                      "[${entries}]. Every installed header belongs under include/troupe/ "
                      "(cmake/TroupeInstall.cmake).")
endif()
foreach(header actors/actor.h interconnect/interconnect.h node/node.h proto/config.pb.h
               proto/events.proto)
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

# -- consumers ------------------------------------------------------------------------------------
build_consumer(consumer "${here}/consumer")
run("${WORK_DIR}/consumer/consumer")
run("${WORK_DIR}/consumer/consumer_test")
run("${WORK_DIR}/consumer/consumer_cluster")
run("${WORK_DIR}/consumer/consumer_node")

# --no-warn-unused-cli: the variable goes unused, since nothing asks for GoogleTest; that is the point.
build_consumer(actors_only "${here}/actors_only" -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON
               --no-warn-unused-cli)
run("${WORK_DIR}/actors_only/actors_only")

build_consumer(proto_events "${here}/proto_events")
run("${WORK_DIR}/proto_events/proto_events")

# The examples as a user's project (examples/README.md, "Building the examples on their own").
build_consumer(examples "${SOURCE_DIR}/examples")
run_within(30 "${WORK_DIR}/examples/ping_pong" --pairs=1 --seconds=1)
run_within(60 "${WORK_DIR}/examples/client_server" --requests=1000)
# About 3 s: start-up, a second of load, the nodes' shutdown (SIGKILL after 5 s if one hangs).
run_within(60 "${WORK_DIR}/examples/troupe_cluster" --nodes=2 --seconds=1
           "--workdir=${WORK_DIR}/examples/cluster")

execute_process(
  COMMAND ${CMAKE_COMMAND} -S "${here}/components" -B "${WORK_DIR}/components" -G "${GENERATOR}"
          -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
          "-DTROUPE_COMPONENTS=actors;no_such_component"
  TIMEOUT 120
  RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(result EQUAL 0 OR NOT out MATCHES "no_such_component")
  message(FATAL_ERROR "find_package(Troupe COMPONENTS no_such_component) must fail naming the "
                      "component (result ${result}):\n${out}")
endif()
