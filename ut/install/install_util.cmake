# SPDX-License-Identifier: Apache-2.0
# What install_test.cmake (static libraries) and shared_test.cmake (BUILD_SHARED_LIBS) share:
# running bounded commands, building a consumer project against `prefix`, and checking the
# installed programs. Include after setting prefix, WORK_DIR, GENERATOR, CXX_COMPILER,
# CXX_LAUNCHER and VERSION.
set(here "${CMAKE_CURRENT_LIST_DIR}")

# Runs a command; fails on a non-zero status or when it has not ended within `seconds` (the
# result then names the timeout, and a troupe_cluster's children die with it: PR_SET_PDEATHSIG).
# Leaves its output in `run_output`.
function(run_within seconds)
  execute_process(COMMAND ${ARGN} TIMEOUT ${seconds} RESULT_VARIABLE result OUTPUT_VARIABLE out
                  ERROR_VARIABLE out)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "failed (${result}): ${ARGN}\n${out}")
  endif()
  message(STATUS "${out}")
  set(run_output "${out}" PARENT_SCOPE)
endfunction()

# Runs an install, configure, build or a consumer that ends on its own within seconds.
function(run)
  run_within(300 ${ARGN})
  set(run_output "${run_output}" PARENT_SCOPE)
endfunction()

# Configures and builds the consumer project in `dir` into WORK_DIR/<name> against `prefix`; extra
# arguments go to the configure step.
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

# Configures the components/ project asking for `components` with the extra configure arguments
# after them; the configure must fail with output matching `regex`.
function(expect_find_failure components regex)
  string(MAKE_C_IDENTIFIER "${components}" name)
  execute_process(
    COMMAND ${CMAKE_COMMAND} -S "${here}/components" -B "${WORK_DIR}/components_${name}"
            -G "${GENERATOR}" -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
            "-DTROUPE_COMPONENTS=${components}" ${ARGN}
    TIMEOUT 120
    RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(result EQUAL 0 OR NOT out MATCHES "${regex}")
    message(FATAL_ERROR "find_package(Troupe COMPONENTS ${components}) with [${ARGN}] must fail "
                        "matching '${regex}' (result ${result}):\n${out}")
  endif()
endfunction()

# Builds and runs actors_only/ with GoogleTest, OpenSSL and pkg-config (so cpp-httplib) made
# unfindable. --no-warn-unused-cli: the variables go unused, since nothing asks for those
# packages; that is the point.
function(check_actors_only)
  build_consumer(actors_only "${here}/actors_only" -DCMAKE_DISABLE_FIND_PACKAGE_GTest=ON
                 -DCMAKE_DISABLE_FIND_PACKAGE_OpenSSL=ON -DCMAKE_DISABLE_FIND_PACKAGE_PkgConfig=ON
                 --no-warn-unused-cli)
  run("${WORK_DIR}/actors_only/actors_only")
endfunction()

# Fails when `pkg-config --libs <module>` links OpenSSL, xxHash or cpp-httplib.
function(expect_pkg_config_without_private module)
  pkg_config(${module} --libs)
  if(pkg_config_output MATCHES "-l(ssl|crypto|xxhash|cpp-httplib)( |$)")
    message(FATAL_ERROR "pkg-config --libs ${module} names ${CMAKE_MATCH_1}: "
                        "${pkg_config_output}")
  endif()
endfunction()

# Runs the pkg-config module `module` of `prefix` with the given flags; the output (one line) is
# left in `pkg_config_output`.
function(pkg_config module)
  find_program(PKG_CONFIG_EXECUTABLE pkg-config REQUIRED)
  run(${CMAKE_COMMAND} -E env "PKG_CONFIG_PATH=${prefix}/${LIBDIR}/pkgconfig"
      ${PKG_CONFIG_EXECUTABLE} ${ARGN} ${module})
  string(STRIP "${run_output}" out)
  set(pkg_config_output "${out}" PARENT_SCOPE)
endfunction()

# The installed programs in <prefix>/bin, as a user runs them, without LD_LIBRARY_PATH (shared
# libraries come through the RUNPATH): troupe_node and troupe_loadgen print the version and the
# commit, and troupe_cluster, finding troupe_node and troupe_loadgen next to it, runs two nodes
# under load for a second over loopback (about 3 s with start-up and shutdown; SIGKILL after 5 s
# if a node hangs).
function(check_programs)
  file(GLOB programs RELATIVE "${prefix}/bin" "${prefix}/bin/*")
  list(SORT programs)
  if(NOT programs STREQUAL "troupe_cluster;troupe_loadgen;troupe_node")
    message(FATAL_ERROR "${prefix}/bin holds [${programs}], expected troupe_cluster, "
                        "troupe_loadgen and troupe_node")
  endif()
  string(REPLACE "." "\\." version "${VERSION}")
  foreach(program troupe_node troupe_loadgen troupe_cluster)
    run_within(30 ${CMAKE_COMMAND} -E env --unset=LD_LIBRARY_PATH "${prefix}/bin/${program}"
               --version)
    if(NOT run_output MATCHES "^${program} \\(Troupe\\) ${version} \\(commit ([0-9a-f]+|unknown)\\)\n$")
      message(FATAL_ERROR "${prefix}/bin/${program} --version printed '${run_output}'")
    endif()
  endforeach()
  run_within(60 ${CMAKE_COMMAND} -E env --unset=LD_LIBRARY_PATH "${prefix}/bin/troupe_cluster"
             --nodes=2 --seconds=1 "--workdir=${WORK_DIR}/installed_cluster")
endfunction()
