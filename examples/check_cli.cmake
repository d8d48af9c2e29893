# SPDX-License-Identifier: Apache-2.0
# ctest examples_cli: every example binary's command line (cli.h), as a script or a person sees it.
# - --help and -h: exit 0, usage and the exit statuses on stdout; --version: exit 0, one line
#   "<binary> (Troupe) <version> (commit <git commit>)";
# - an unknown flag, a value that does not parse, a stray argument, a bad flag in a --flagfile:
#   exit 2 with one line on stderr naming it;
# - troupe_node with a config that fails any section's validation, does not parse or is missing:
#   exit 3, the field (or line) at fault on stderr; troupe_cluster with such a --node_config: 3;
# - out-of-range values, a bad --chaos plan, bad payload sizes, --rate or --baseline: exit 2,
#   before any process starts;
# - --membership=etcd's flags (a join or leave without it, a missing etcd, troupe_loadgen without
#   --expect_nodes): exit 2 before etcd or any node starts; a --node_config with a node_id: 3.
# Run with -DBIN_DIR=<examples build directory> -DVERSION=<Troupe version> -DDIR=<scratch dir>.
file(REMOVE_RECURSE "${DIR}")
file(MAKE_DIRECTORY "${DIR}")

# Runs BIN_DIR/<binary> with the remaining arguments; checks the exit status is `want`, that
# stdout matches `out_regex` and stderr `err_regex` (empty: anything).
function(expect want out_regex err_regex binary)
  execute_process(COMMAND "${BIN_DIR}/${binary}" ${ARGN}
                  TIMEOUT 30 RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(what "${binary} ${ARGN}")
  if(NOT "${result}" STREQUAL "${want}")
    message(FATAL_ERROR "${what}: exit ${result}, want ${want}\nstdout:\n${out}\nstderr:\n${err}")
  endif()
  if(out_regex AND NOT out MATCHES "${out_regex}")
    message(FATAL_ERROR "${what}: stdout does not match '${out_regex}':\n${out}")
  endif()
  if(err_regex AND NOT err MATCHES "${err_regex}")
    message(FATAL_ERROR "${what}: stderr does not match '${err_regex}':\n${err}")
  endif()
  message(STATUS "ok: ${what} -> ${result}")
endfunction()

string(REPLACE "." "\\." version "${VERSION}")
file(WRITE "${DIR}/flagfile" "--no_such_flag=1\n")
# The version line names the library's commit: 40 hex digits, or "unknown" outside a git checkout.
set(version "${version} \\(commit ([0-9a-f]+|unknown)\\)")
foreach(binary ping_pong client_server troupe_node troupe_loadgen troupe_cluster)
  expect(0 "^${binary} \\(Troupe\\) ${version}\n.*Usage: ${binary} .*\n  --help, -h\n.*Exit status: 0 "
         "" ${binary} --help)
  expect(0 "Exit status: 0 .*1 the run failed.*2 bad command.*3 bad config" "" ${binary} -h)
  expect(0 "^${binary} \\(Troupe\\) ${version}\n$" "" ${binary} --version)
  expect(2 "" "^${binary}: unknown flag --no_such_flag \\(see --help\\)\n$" ${binary} --no_such_flag)
  expect(2 "" "unexpected argument 'stray'" ${binary} stray)
  expect(2 "" "Unknown command line flag 'no_such_flag'" ${binary} "--flagfile=${DIR}/flagfile")
endforeach()
expect(2 "" "^troupe_node: --run_seconds=soon: [^\n]*\n$" troupe_node --run_seconds=soon)
expect(2 "" "--run_seconds: must be 0 or more" troupe_node --run_seconds=-1)
expect(2 "" "--config: missing value" troupe_node --config)
expect(2 "" "--config: required" troupe_node)
expect(2 "" "--requests must be" client_server --requests=0)
expect(2 "" "--pairs and --seconds" ping_pong --seconds=0)

# Config errors: the field, the line, the file.
file(WRITE "${DIR}/bad_field.conf"
     "interconnect { nodes { node_id: 1 host: \"127.0.0.1\" port: 19001 } }\n"
     "pools { name: \"User\" threads: 0 }\n")
file(WRITE "${DIR}/bad_syntax.conf" "pools { name: \"User\" threads: \n")
expect(3 "" "pools\\[0\\]\\.threads: must be" troupe_node "--config=${DIR}/bad_field.conf")
expect(3 "" "bad_syntax.conf: [^\n]*line 2" troupe_node "--config=${DIR}/bad_syntax.conf")
expect(3 "" "missing.conf" troupe_node "--config=${DIR}/missing.conf")
expect(3 "" "bad_field.conf: pools\\[0\\]\\.threads" ping_pong "--config=${DIR}/bad_field.conf")
expect(3 "" "bad_field.conf: pools\\[0\\]\\.threads" troupe_loadgen
       "--config=${DIR}/bad_field.conf")
# Every section is checked before the node starts: the interconnect's and the node's own (etcd).
file(WRITE "${DIR}/bad_interconnect.conf" "interconnect { heartbeat_interval_ms: 1 }\n")
expect(3 "" "bad_interconnect.conf: interconnect\\.heartbeat_interval_ms: must be" troupe_node
       "--config=${DIR}/bad_interconnect.conf")
file(WRITE "${DIR}/bad_etcd.conf"
     "interconnect { etcd { endpoint: \"http://127.0.0.1:1\" lease_ttl_s: 1 } }\n")
expect(3 "" "bad_etcd.conf: interconnect\\.etcd\\.lease_ttl_s: must be" troupe_node
       "--config=${DIR}/bad_etcd.conf")
# A node listening on a wildcard address must say where the others dial it (a flag may).
file(WRITE "${DIR}/wildcard.conf"
     "interconnect { etcd { endpoint: \"http://127.0.0.1:1\" } listen { host: \"0.0.0.0\" } }\n")
expect(3 "" "wildcard.conf: interconnect\\.advertise\\.host: required" troupe_node
       "--config=${DIR}/wildcard.conf")
expect(3 "" "wildcard.conf with --advertise_host=0\\.0\\.0\\.0: interconnect\\.advertise\\.host"
       troupe_node "--config=${DIR}/wildcard.conf" --advertise_host=0.0.0.0)
expect(2 "" "--advertise_port: must be 0 to 65535" troupe_node "--config=${DIR}/wildcard.conf"
       --advertise_port=70000)
file(WRITE "${DIR}/bad_overlay.conf" "pools { name: \"User\" threads: 0 }\n")
expect(3 "" "--node_config: [^\n]*pools\\[0\\]\\.threads" troupe_cluster
       "--node_config=${DIR}/bad_overlay.conf" "--workdir=${DIR}/cluster")
file(WRITE "${DIR}/with_nodes.conf"
     "interconnect { nodes { node_id: 1 host: \"127.0.0.1\" port: 19001 } }\n")
expect(3 "" "interconnect\\.nodes: leave it out" troupe_cluster
       "--node_config=${DIR}/with_nodes.conf" "--workdir=${DIR}/cluster")

# troupe_cluster's own checks come before any process starts.
expect(2 "" "--nodes must be" troupe_cluster --nodes=0)
expect(2 "" "--chaos: 'kill:9@1': the node is one of 1\\.\\.3" troupe_cluster --nodes=3
       --chaos=kill:9@1)
expect(2 "" "--chaos: 'kill:2@7': the time" troupe_cluster --seconds=5 --chaos=kill:2@7)
expect(2 "" "node 2 is not down" troupe_cluster --chaos=restart:2@1)
expect(2 "" "want ACTION:NODE@SECONDS" troupe_cluster --chaos=2@1)
# The rolling restart's flags, checked before any process starts.
expect(2 "" "--roll: seconds after the load start, from 0 to below --seconds \\(5\\)" troupe_cluster
       --roll=5 --seconds=5)
expect(2 "" "--roll and --chaos: one or the other" troupe_cluster --roll=1 --chaos=kill:2@1)
expect(2 "" "--roll_binary and --roll_node_flags need --roll" troupe_cluster
       --roll_node_flags=--a=b)
expect(2 "" "--roll_node_flags: 'x' is not a flag" troupe_cluster --roll=1 "--roll_node_flags=x")
expect(2 "" "/no/troupe_node: No such file" troupe_cluster --roll=1 --roll_binary=/no/troupe_node)
# The load's flags, checked before any process starts: payload sizes, the open loop's rate, the
# baseline.
expect(2 "" "--payload: '64k' is not a size in bytes" troupe_cluster --payload=64,64k)
expect(2 "" "--payload with several sizes: not with --chaos, --roll" troupe_cluster
       --payload=64,1024 --chaos=kill:2@1)
expect(2 "" "--baseline=${DIR}/nothing: ${DIR}/nothing/summary.json: cannot read" troupe_cluster
       "--baseline=${DIR}/nothing")
expect(2 "" "--rate: at most 1000000000 events/s per pair" troupe_loadgen
       "--config=${DIR}/bad_field.conf" --rate=1000000001)
expect(2 "" "--payload: '-1' is not a size in bytes" troupe_loadgen
       "--config=${DIR}/bad_field.conf" --payload=-1)
expect(2 "" "--node_pids: 'x': want NODE:PID" troupe_loadgen "--config=${DIR}/bad_field.conf"
       --node_pids=x)
# Membership in etcd: the flags that go with it, checked before etcd or any node starts.
expect(2 "" "--membership: static or etcd, got 'dns'" troupe_cluster --membership=dns)
expect(2 "" "--chaos: join needs --membership=etcd" troupe_cluster --chaos=join@1)
expect(2 "" "--chaos: leave needs --membership=etcd" troupe_cluster --chaos=leave:2@1)
expect(2 "" "--base_port: static membership only" troupe_cluster --membership=etcd
       --base_port=20000)
expect(2 "" "--etcd_binary=/no/etcd: not found" troupe_cluster --membership=etcd
       --etcd_binary=/no/etcd)
expect(2 "" "--chaos: 'leave:4@1': the node is one of 1\\.\\.3" troupe_cluster --membership=etcd
       --chaos=leave:4@1)
expect(2 "" "node 2 is down already" troupe_cluster --membership=etcd --chaos=leave:2@1,kill:2@2)
file(WRITE "${DIR}/with_node_id.conf" "node_id: 7\n")
expect(3 "" "--node_config: [^\n]*node_id: leave it out, etcd gives each node its id"
       troupe_cluster --membership=etcd "--node_config=${DIR}/with_node_id.conf"
       "--workdir=${DIR}/cluster")
file(WRITE "${DIR}/etcd.conf"
     "interconnect { etcd { endpoint: \"http://127.0.0.1:1\" } listen { port: 0 } }\n")
expect(2 "" "--expect_nodes: required with etcd membership" troupe_loadgen
       "--config=${DIR}/etcd.conf")
