// SPDX-License-Identifier: Apache-2.0
//
// Fault injection, membership changes and rolling restarts for `troupe_cluster --chaos` and
// `--roll`, and how the load report learns of them.
//
//   | step                     | who            | how                                             |
//   |--------------------------|----------------|-------------------------------------------------|
//   | the plan                 | troupe_cluster | --chaos=kill:2@1,restart:2@2.5,join@2,leave:3@3 |
//   |                          |                | (ParseChaosPlan)                                |
//   | the load starts          | troupe_loadgen | writes the time to --load_start_file            |
//   |                          |                | (WriteLoadStart); troupe_cluster reads it       |
//   | a node is killed/started | troupe_cluster | SIGKILL to the pid it started / the same        |
//   |                          |                | command again; appends a row to chaos.csv       |
//   | a node joins / leaves    | troupe_cluster | starts one more troupe_node / SIGTERM (a clean  |
//   |                          |                | stop); appends a row to chaos.csv (etcd         |
//   |                          |                | membership only)                                |
//   | a rolling restart        | troupe_cluster | --roll=T: each node in turn leaves (SIGTERM,    |
//   |                          |                | a roll-leave row), starts again and answers     |
//   |                          |                | GET /readyz 200 (a roll-ready row)              |
//   | the report               | troupe_loadgen | reads --chaos_log (ReadChaosLog) at the end:    |
//   |                          |                | chaos.csv, a table and plot markers; losses on  |
//   |                          |                | pairs touching a node killed or gone are        |
//   |                          |                | expected; the roll's rows give its restarts,    |
//   |                          |                | losses (none allowed) and RTT p99               |
//
// A row names the node by its id. With etcd membership a node started by a restart or a join
// gets a new id from etcd; troupe_cluster writes its row, timed at the process's start, once the
// node has told it its id (WriteNodeIdFile, node_runner.h).
//
// Times are seconds after the load start, as troupe_loadgen wrote it, on the wall clock both
// processes share (one machine). Second N of the per-second figures covers (N-1, N].
//
// Thread-safety: thread-safe (no shared state).
//
// Example:
//
//   absl::StatusOr<std::vector<ChaosAction>> plan = ParseChaosPlan("kill:2@1,restart:2@2", 3, 4);
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace troupe::examples {

// One step of a chaos plan.
struct ChaosAction {
  // kKill: SIGKILL; kRestart: the same command line again; kJoin: one more troupe_node; kLeave:
  // SIGTERM, a clean stop.
  enum class Kind { kKill, kRestart, kJoin, kLeave };
  Kind kind = Kind::kKill;
  // 1..N, the node's place in the start order; 0 for a join (a new node).
  uint32_t node = 0;
  // After the load start.
  absl::Duration at;
};

// Returns "kill", "restart", "join" or "leave".
std::string ChaosKindName(ChaosAction::Kind kind);

// Parses `plan`, a comma-separated list of ACTION:NODE@SECONDS (ACTION kill, restart or leave,
// NODE in 1..`nodes`) or join@SECONDS, SECONDS a decimal in [0, `seconds`), into actions sorted
// by time (the given order at equal times). kInvalidArgument names the item at fault: a bad item,
// a node out of range, a time out of range, a kill or leave of a node already down or a restart of
// one that is up.
absl::StatusOr<std::vector<ChaosAction>> ParseChaosPlan(absl::string_view plan, int nodes,
                                                        int seconds);

// An action carried out, as chaos.csv holds it.
struct ChaosEvent {
  // After the load start.
  double second = 0;
  uint32_t node = 0;
  // "kill", "restart", "join", "leave", or a rolling restart's kRollLeave or kRollReady.
  std::string action;
  // The process killed, or the one started.
  int64_t pid = 0;
};

// The actions of a rolling restart's rows (troupe_cluster --roll): a node told to leave (SIGTERM,
// the pid of the process that leaves), and the same node ready again (GET /readyz answered 200;
// the pid of the new process; with etcd membership, the node's new id).
inline constexpr absl::string_view kRollLeave = "roll-leave";
inline constexpr absl::string_view kRollReady = "roll-ready";

// The first line of chaos.csv.
inline constexpr absl::string_view kChaosCsvHeader = "second,node,action,pid";

// Returns one line of chaos.csv (with its '\n').
std::string ChaosCsvRow(const ChaosEvent& event);

// Reads chaos.csv (a header, then ChaosCsvRow lines) and returns its rows sorted by time.
// kNotFound when the file cannot be read, kInvalidArgument naming the line that does not parse.
absl::StatusOr<std::vector<ChaosEvent>> ReadChaosLog(const std::string& path);

// Writes `start` to `path` (through a temporary file and a rename: a reader never sees half).
absl::Status WriteLoadStart(const std::string& path, absl::Time start);

// Returns the time WriteLoadStart wrote to `path`, or nullopt when there is none (yet).
std::optional<absl::Time> ReadLoadStart(const std::string& path);

}  // namespace troupe::examples
