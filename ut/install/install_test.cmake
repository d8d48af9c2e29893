# SPDX-License-Identifier: Apache-2.0
# Installs the build tree into a fresh prefix, checks what landed under <prefix>/include, then
# builds and runs projects that find_package(Troupe) from it, as users' projects would:
# - consumer/: an actor program, a GoogleTest test on troupe::testing (COMPONENTS testing) and two
#   nodes over loopback TCP;
# - actors_only/: troupe::actors alone, configured with GoogleTest made unfindable;
# - proto_events/: its own .proto compiled by the exported troupe_protobuf_library(), sent as an
#   EventPB between actors;
# - components/: an unknown component must fail the configure.
# Run with -DBUILD_DIR=... -DSOURCE_DIR=... -DWORK_DIR=... -DGENERATOR=... -DCXX_COMPILER=...
file(REMOVE_RECURSE "${WORK_DIR}")
set(prefix "${WORK_DIR}/prefix")
set(here "${SOURCE_DIR}/ut/install")

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "failed (${result}): ${ARGN}\n${out}")
  endif()
  message(STATUS "${out}")
endfunction()

# Configures and builds the consumer project in `dir` into WORK_DIR/<name>; extra arguments go to
# the configure step.
function(build_consumer name dir)
  run(${CMAKE_COMMAND} -S "${dir}" -B "${WORK_DIR}/${name}" -G "${GENERATOR}"
      -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release
      -DCMAKE_CXX_COMPILER=${CXX_COMPILER} ${ARGN})
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
foreach(header actors/actor.h interconnect/interconnect.h proto/config.pb.h proto/events.proto)
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

# --no-warn-unused-cli: the variable goes unused, since nothing asks for GoogleTest; that is the point.
build_consumer(actors_only "${here}/actors_only" -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON
               --no-warn-unused-cli)
run("${WORK_DIR}/actors_only/actors_only")

build_consumer(proto_events "${here}/proto_events")
run("${WORK_DIR}/proto_events/proto_events")

execute_process(
  COMMAND ${CMAKE_COMMAND} -S "${here}/components" -B "${WORK_DIR}/components" -G "${GENERATOR}"
          -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
          "-DTROUPE_COMPONENTS=actors;no_such_component"
  RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(result EQUAL 0 OR NOT out MATCHES "no_such_component")
  message(FATAL_ERROR "find_package(Troupe COMPONENTS no_such_component) must fail naming the "
                      "component (result ${result}):\n${out}")
endif()
