# SPDX-License-Identifier: Apache-2.0
# ctest compat.next_release and compat.previous_release: a cluster of one release rolls, node by
# node under load, to another, and nothing is lost (docs/operating.md, "Upgrading a cluster").
#
# With PREVIOUS ("VERSION COMMIT" of the previous release, cmake/TroupeRelease.cmake), the old
# nodes are that release's troupe_node, built from this repository's history in a git worktree
# (no download), and the new nodes this tree's. Without it, the new nodes are this tree's
# troupe_node announcing the next release's range (--testing_protocol=N..N+1): the cluster starts
# on version N, runs mixed during the roll, and its new nodes end on N+1 with each other.
# Checks: the run passes with 0 of its tracked events lost after every node restarted and, without
# PREVIOUS, the sessions of the mix and of the end used the versions expected.
# Run with -DCLUSTER=<troupe_cluster> -DNODE=<troupe_node> -DSOURCE=<source dir> -DDIR=<work dir>
# -DNEWEST=<kNewestProtocolVersion> [-DPREVIOUS="VERSION COMMIT"].
file(REMOVE_RECURSE "${DIR}")
file(MAKE_DIRECTORY "${DIR}")
set(roll_flags "")
if(PREVIOUS)
  separate_arguments(previous UNIX_COMMAND "${PREVIOUS}")
  list(GET previous 0 previous_version)
  list(GET previous 1 previous_commit)
  set(tree "${DIR}/previous")
  message(STATUS "building troupe_node ${previous_version} (${previous_commit}) in ${tree}")
  # A run killed before it removed its worktree left an entry whose folder is gone: forget it.
  execute_process(COMMAND git -C "${SOURCE}" worktree prune)
  execute_process(COMMAND git -C "${SOURCE}" worktree add --detach "${tree}" "${previous_commit}"
                  RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "git worktree add ${previous_commit} failed (${result}):\n${out}")
  endif()
  execute_process(
    COMMAND "${CMAKE_COMMAND}" -S "${tree}" -B "${tree}/build" -G Ninja -DCMAKE_BUILD_TYPE=Release
            -DTROUPE_BUILD_TESTS=OFF -DTROUPE_BUILD_BENCHMARKS=OFF -DTROUPE_UNITY_BUILD=ON
    RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(result EQUAL 0)
    execute_process(COMMAND "${CMAKE_COMMAND}" --build "${tree}/build" -j2 --target troupe_node
                    RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE out)
  endif()
  set(old_node "${tree}/build/examples/troupe_node")
  if(NOT result EQUAL 0 OR NOT EXISTS "${old_node}")
    execute_process(COMMAND git -C "${SOURCE}" worktree remove --force "${tree}")
    message(FATAL_ERROR "building troupe_node ${previous_version} failed (${result}):\n${out}")
  endif()
else()
  set(old_node "${NODE}")
  math(EXPR next "${NEWEST} + 1")
  set(roll_flags "--roll_node_flags=--testing_protocol=${NEWEST}..${next}")
  set(old_version "${NEWEST}")
  set(new_version "${next}")
endif()

execute_process(
  COMMAND "${CLUSTER}" --nodes=3 --seconds=6 --window=64 --roll=1 "--node_binary=${old_node}"
          "--roll_binary=${NODE}" ${roll_flags} "--workdir=${DIR}/cluster"
          "--report=${DIR}/report"
  TIMEOUT 90 RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(PREVIOUS)
  execute_process(COMMAND git -C "${SOURCE}" worktree remove --force "${tree}")
endif()
if(NOT result EQUAL 0)
  message(FATAL_ERROR "the mixed-version roll failed (${result}):\n${out}")
endif()
foreach(line "rolling restart: 3 node\\(s\\) left and 3 were ready again"
             "lost: 0 of [1-9][0-9]* tracked events" "OK through the rolling restart")
  if(NOT out MATCHES "${line}")
    message(FATAL_ERROR "the mixed-version roll: no line matching '${line}':\n${out}")
  endif()
endforeach()
if(NOT PREVIOUS)
  # Node 1's log: its first process talks version N (to old nodes, then to new ones: the
  # loadgen and node 2 and 3 until their turn); after its restart, version N+1 with the new nodes
  # and N with the load generator, which stays on this build's range.
  set(mixed FALSE)
  set(upgraded FALSE)
  foreach(node 1 2 3)
    file(READ "${DIR}/cluster/node-${node}.log" log)
    if(NOT log MATCHES "announces protocol versions ${NEWEST}\\.\\.${next}")
      message(FATAL_ERROR "node ${node} never announced ${NEWEST}..${next}:\n${log}")
    endif()
    if(log MATCHES "up \\(peer incarnation [0-9]+, protocol version ${old_version},")
      set(mixed TRUE)
    endif()
    if(log MATCHES "up \\(peer incarnation [0-9]+, protocol version ${new_version},")
      set(upgraded TRUE)
    endif()
  endforeach()
  if(NOT mixed OR NOT upgraded)
    message(FATAL_ERROR "the node logs show no session of version ${old_version} (${mixed}) or "
                        "none of version ${new_version} (${upgraded})")
  endif()
endif()
message(STATUS "${out}")
