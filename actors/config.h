// SPDX-License-Identifier: Apache-2.0
//
// Loading and checking a node's configuration (`proto/config.proto`, protobuf text format).
//
// Each layer checks the sections it reads:
//   | section                          | checked by                                            |
//   |----------------------------------|-------------------------------------------------------|
//   | node_id, pools, default_pool,    | ValidateConfig here (ParseConfig, LoadConfigFile and  |
//   | scheduler, log, max_mailboxes,   | ActorSystem::Create call it)                          |
//   | max_services                     |                                                       |
//   | interconnect (but etcd, listen)  | troupe::interconnect::ValidateConfig                  |
//   |                                  | (interconnect/config.h; Interconnect::Start calls it) |
//   | interconnect.etcd, .listen,      | troupe::node::ValidateConfig (node/config.h), which   |
//   | monitoring                       | checks every section; troupe::node::Node::Start and   |
//   |                                  | troupe::node::LoadConfigFile call it                  |
// A program that runs only an ActorSystem loads its file here; a node loads it with
// troupe::node::LoadConfigFile, so a bad field anywhere is named before anything starts.
//
// Every function returns kInvalidArgument with a message naming the offending field (for example
// `pools[1].threads: must be between 1 and 256, got 0`) or, for text that does not parse, the
// line and column; kNotFound / kPermissionDenied when the file cannot be read. Nothing here exits
// or aborts on bad input.
//
// Thread-safety: thread-safe (no shared state).
//
// Example:
//
//   absl::StatusOr<troupe::proto::ActorSystemConfig> config =
//       troupe::LoadConfigFile("node.conf");
//   if (!config.ok()) { std::cerr << config.status() << "\n"; return 1; }
//   auto system = troupe::ActorSystem::Create(*config);
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#include "actors/log.h"
#include "proto/config.pb.h"

namespace troupe {

// Parses protobuf text format into a config and validates the actor system's sections.
absl::StatusOr<proto::ActorSystemConfig> ParseConfig(std::string_view text);

// Reads and parses the file at `path`; errors are prefixed with the path.
absl::StatusOr<proto::ActorSystemConfig> LoadConfigFile(const std::string& path);

// Checks the actor system's sections: field ranges and cross-references (pool names,
// default_pool, log level). The interconnect and monitoring sections are not looked at.
absl::Status ValidateConfig(const proto::ActorSystemConfig& config);

// Returns `config` with every default of the actor system's sections filled in (the four
// standard pools when none are listed); the other sections are left as they are. `config` should
// have passed ValidateConfig.
proto::ActorSystemConfig WithDefaults(const proto::ActorSystemConfig& config);

// Sets a node's log context from its config's `log` section, which passed ValidateConfig (aborts
// on one that did not): names the user_components, sets the default level, the components' own
// levels and the format. ActorSystem does this when it starts.
void ApplyLogConfig(const proto::LogConfig& log, LogContext* context);

// -- for each layer's validator ---------------------------------------------------------------

// Returns kInvalidArgument "<field>: <message>".
absl::Status ConfigFieldError(absl::string_view field, absl::string_view message);
// Returns OK when low <= value <= high, else kInvalidArgument
// "<field>: must be between <low> and <high>, got <value>".
absl::Status CheckConfigRange(absl::string_view field, uint64_t value, uint64_t low, uint64_t high);

}  // namespace troupe
