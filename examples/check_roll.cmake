# SPDX-License-Identifier: Apache-2.0
# ctest cluster_roll: troupe_cluster --roll restarts the 3 nodes of a 5 s load one after the
# other from 1 s on, the restarted ones from --roll_binary with --roll_node_flags; checks what the
# operator and the report show.
# - the run passes (exit 0): every step (ready, SIGTERM, exit 0, start, ready) went well and no
#   tracked event was lost (each acknowledged, or reported undelivered while its node left);
# - stdout has a leave, an exit 0, a start with the extra flag and a ready line per node, the
#   summary with 0 lost and the RTT p99 during the roll next to the whole run's;
# - the report has chaos.csv (roll-leave then roll-ready for nodes 1, 2, 3), report.html says the
#   run passed through the roll, report.gp marks the six rows, and no pair lost an event.
# Run with -DCLUSTER=<troupe_cluster> -DNODE=<troupe_node> -DDIR=<work directory>.
include("${CMAKE_CURRENT_LIST_DIR}/report_checks.cmake")
file(REMOVE_RECURSE "${DIR}")
file(MAKE_DIRECTORY "${DIR}")
set(report "${DIR}/report")
execute_process(
  COMMAND "${CLUSTER}" --nodes=3 --seconds=5 --window=64 --roll=1 "--roll_binary=${NODE}"
          "--roll_node_flags=--run_seconds=0" "--workdir=${DIR}/cluster" "--report=${report}"
  TIMEOUT 60 RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "troupe_cluster --roll failed (${result}):\n${out}")
endif()
foreach(node 1 2 3)
  foreach(line "roll: node ${node} leaves \\(SIGTERM to pid [0-9]+\\) at [0-9.]+ s"
               "roll: node ${node} exited 0 after"
               "roll: node ${node} started again \\(pid [0-9]+, [^\n]*--node_id=${node} --run_seconds=0\\)"
               "roll: node ${node} ready again \\(GET /readyz 200\\)")
    if(NOT out MATCHES "${line}")
      message(FATAL_ERROR "troupe_cluster --roll: no line matching '${line}':\n${out}")
    endif()
  endforeach()
endforeach()
foreach(line "roll: every node restarted, from [0-9.]+ s to [0-9.]+ s"
             "rolling restart: 3 node\\(s\\) left and 3 were ready again"
             "lost: 0 of [1-9][0-9]* tracked events"
             "RTT p99 during the roll \\(seconds [0-9]+-[0-9]+\\): [0-9.]+ us \\([1-9][0-9]* round trips\\); whole run: [0-9.]+ us"
             "OK through the rolling restart")
  if(NOT out MATCHES "${line}")
    message(FATAL_ERROR "troupe_cluster --roll: no line matching '${line}':\n${out}")
  endif()
endforeach()

file(STRINGS "${report}/chaos.csv" rows)
list(LENGTH rows count)
if(NOT count EQUAL 7)
  message(FATAL_ERROR "chaos.csv: want a header and 6 rows, got ${count} lines: ${rows}")
endif()
set(index 1)
foreach(node 1 2 3)
  foreach(action roll-leave roll-ready)
    list(GET rows ${index} row)
    if(NOT row MATCHES "^[0-9.]+,${node},${action},[0-9]+$")
      message(FATAL_ERROR "chaos.csv: row ${index}: want ${action} of node ${node}, got: ${rows}")
    endif()
    math(EXPR index "${index} + 1")
  endforeach()
endforeach()
troupe_expect_clean_pairs("${report}")
troupe_expect_html("${report}" "Passed through the rolling restart" "<h2>Rolling restart</h2>"
                   "<td class=\"l\">roll-leave</td>" "<td class=\"l\">roll-ready</td>"
                   "RTT p99 during the roll")
troupe_expect_markers("${report}" 6 "roll")  # six rows
file(READ "${DIR}/cluster/node-2.log" log)
if(NOT log MATCHES "roll: node 2 restarted at")
  message(FATAL_ERROR "node-2.log does not mark the restart")
endif()
message(STATUS "rolling restart checked: ${report}/report.html")
