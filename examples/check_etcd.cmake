# SPDX-License-Identifier: Apache-2.0
# ctest cluster_etcd: troupe_cluster --membership=etcd runs 3 nodes that find each other in a local
# etcd; one more node joins 2 s into a 4 s load and node 3 leaves (SIGTERM) at 3 s. Checks what
# the operator and the report show.
# - the run passes (exit 0) and no pair loses an event: node 3 leaves gracefully, so the pair it
#   sends for ends cleanly first and the pair sending to it pauses (what node 3 refused while
#   leaving is reported undelivered, not lost), then goes on to another member;
# - stdout names etcd's endpoint, the ids etcd gave the nodes, the join (with the node's id) and
#   the leave, and how long after its start the first event came back from the joined node;
# - the joined node's pair has its own row in pairs.csv and acknowledged events, lost none;
# - chaos.csv has the join then the leave; report.html lists both and the join's timing;
# - the config has etcd's endpoint and no node table; the node that left stopped cleanly; etcd is
#   gone at the end and so is its data directory.
# Run with -DCLUSTER=<troupe_cluster> -DDIR=<work directory>.
include("${CMAKE_CURRENT_LIST_DIR}/report_checks.cmake")
file(REMOVE_RECURSE "${DIR}")
file(MAKE_DIRECTORY "${DIR}")
set(report "${DIR}/report")
execute_process(
  COMMAND "${CLUSTER}" --membership=etcd --nodes=3 --seconds=4 --window=64
          "--workdir=${DIR}/cluster" "--report=${report}"
  TIMEOUT 100 RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "troupe_cluster --membership=etcd failed (${result}):\n${out}")
endif()
foreach(line "etcd at http://127\\.0\\.0\\.1:[0-9]+ \\(pid [0-9]+"
             "nodes 1 2 3 registered in etcd"
             "membership in etcd"
             "membership: node [0-9]+ joined \\(pid [0-9]+\\), started at [0-9]+\\.[0-9][0-9] s"
             "membership: node 3 leaves \\(SIGTERM to pid [0-9]+\\) at [0-9]+\\.[0-9][0-9] s"
             "node [0-9]+ joined: first event [0-9]+\\.[0-9][0-9] s after its start"
             "OK[^\n]*: (every event acknowledged once|no tracked event lost)" "etcd stopped")
  if(NOT out MATCHES "${line}")
    message(FATAL_ERROR "troupe_cluster --membership=etcd: no line matching '${line}':\n${out}")
  endif()
endforeach()
string(REGEX MATCH "membership: node ([0-9]+) joined" joined "${out}")
set(joined "${CMAKE_MATCH_1}")
string(REGEX MATCH "etcd at [^ ]+ \\(pid ([0-9]+)" etcd "${out}")
set(etcd_pid "${CMAKE_MATCH_1}")
message(STATUS "node ${joined} joined; etcd was pid ${etcd_pid}")

file(STRINGS "${report}/chaos.csv" rows)
list(LENGTH rows count)
if(NOT count EQUAL 3)
  message(FATAL_ERROR "chaos.csv: want a header, a join and a leave, got ${count} lines: ${rows}")
endif()
list(GET rows 1 join)
list(GET rows 2 leave)
if(NOT join MATCHES "^[0-9.]+,${joined},join,[0-9]+$" OR NOT leave MATCHES "^[0-9.]+,3,leave,[0-9]+$")
  message(FATAL_ERROR "chaos.csv: want node ${joined} joined, then node 3 left, got: ${rows}")
endif()
# pair,route,events,events_per_s,mb_per_s,p50_us,p99_us,p999_us,max_us,lost,dup,undelivered,unsure,
# problem: pair 1 (1->2) and the joined node's pair 4 are clear of node 3 and lose nothing; no
# pair loses an event or has a problem.
file(STRINGS "${report}/pairs.csv" rows REGEX "^[14],")
foreach(want "1,1->2" "4,${joined}->1")
  if(NOT rows MATCHES "(^|;)${want},[1-9][0-9]*,[^,]*,[^,]*,[^,]*,[^,]*,[^,]*,[^,]*,0,0,0,0,(;|$)")
    message(FATAL_ERROR "pairs.csv: pair ${want} should have events and be clean: '${rows}'")
  endif()
endforeach()
troupe_expect_clean_pairs("${report}")
troupe_expect_html("${report}" "<b>Passed" "<h2>Faults and membership changes</h2>"
                   "<td class=\"l\">join</td>" "<td class=\"l\">leave</td>"
                   "node ${joined} joined: first event")

file(READ "${DIR}/cluster/cluster.conf" config)
if(NOT config MATCHES "etcd { endpoint: \"http://127\\.0\\.0\\.1:[0-9]+\"" OR config MATCHES "nodes {"
   OR config MATCHES "\nnode_id:")
  message(FATAL_ERROR "cluster.conf: want etcd's endpoint, no node table, no node_id:\n${config}")
endif()
file(READ "${DIR}/cluster/node-3.log" log)
if(NOT log MATCHES "troupe_node: node 3 stopped")
  message(FATAL_ERROR "node-3.log: node 3 did not stop cleanly when it left")
endif()
if(EXISTS "${DIR}/cluster/etcd-data")
  message(FATAL_ERROR "etcd's data directory is still there: ${DIR}/cluster/etcd-data")
endif()
if(EXISTS "/proc/${etcd_pid}/cmdline")
  file(READ "/proc/${etcd_pid}/cmdline" cmdline)
  if(cmdline MATCHES "etcd")
    message(FATAL_ERROR "etcd (pid ${etcd_pid}) outlived troupe_cluster")
  endif()
endif()
message(STATUS "etcd cluster checked: ${report}/report.html")
