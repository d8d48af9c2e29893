# SPDX-License-Identifier: Apache-2.0
# ctest counters_etcd: the sharded counters service (counters.h) under troupe_cluster with
# membership in etcd: 3 counters_node processes, counters_load as the load, one more node joining
# half-way and node 3 leaving at three quarters. Checks:
# - the run passes (exit 0): counters_load found every acknowledged update in the final state,
#   none applied twice, every counter answered the final read;
# - the join and the leave happened under the load, node 3 handed its counters off before it
#   stopped, and the joined node serves counters in the final read (keys moved to it);
# - node 3's log says it stopped cleanly.
# Run with -DCLUSTER=<troupe_cluster> -DNODE=<counters_node> -DLOAD=<counters_load> -DDIR=<dir>.
file(REMOVE_RECURSE "${DIR}")
file(MAKE_DIRECTORY "${DIR}")
execute_process(
  COMMAND "${CLUSTER}" --membership=etcd --nodes=3 --seconds=6 --window=16
          "--node_binary=${NODE}" "--loadgen_binary=${LOAD}" "--workdir=${DIR}/cluster"
  TIMEOUT 150 RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "troupe_cluster with the counters service failed (${result}):\n${out}")
endif()
foreach(line "membership: node [0-9]+ joined \\(pid [0-9]+\\)"
             "membership: node 3 leaves \\(SIGTERM to pid [0-9]+\\)"
             "counters_load: [0-9]+ updates sent, [1-9][0-9]* acknowledged"
             "counters_load: OK: [1-9][0-9]* acknowledged updates, 0 missing from the final state, 0 applied twice")
  if(NOT out MATCHES "${line}")
    message(FATAL_ERROR "counters: no line matching '${line}':\n${out}")
  endif()
endforeach()
string(REGEX MATCH "membership: node ([0-9]+) joined" joined "${out}")
set(joined "${CMAKE_MATCH_1}")
if(NOT out MATCHES "final state: [0-9]+ counters read \\([^)]*node ${joined}: [1-9]")
  message(FATAL_ERROR "counters: the joined node ${joined} serves no counter at the end:\n${out}")
endif()
file(READ "${DIR}/cluster/node-3.log" leaver)
foreach(line "node 3 handed off [0-9]+ counters" "node 3 stopped")
  if(NOT leaver MATCHES "${line}")
    message(FATAL_ERROR "counters: node 3's log has no line matching '${line}':\n${leaver}")
  endif()
endforeach()
message(STATUS "counters: node ${joined} joined, node 3 left; every acknowledged update found")
