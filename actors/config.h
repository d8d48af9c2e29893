// SPDX-License-Identifier: Apache-2.0
//
// Loading and checking a node's configuration (`proto/config.proto`, protobuf text format).
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

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "proto/config.pb.h"

namespace troupe {

// Parses protobuf text format into a config and validates it.
absl::StatusOr<proto::ActorSystemConfig> ParseConfig(std::string_view text);

// Reads and parses the file at `path`.
absl::StatusOr<proto::ActorSystemConfig> LoadConfigFile(const std::string& path);

// Checks field ranges and cross-references (pool names, default_pool, log level).
absl::Status ValidateConfig(const proto::ActorSystemConfig& config);

// Returns `config` with every default filled in (the four standard pools when none are listed).
// `config` should have passed ValidateConfig.
proto::ActorSystemConfig WithDefaults(const proto::ActorSystemConfig& config);

}  // namespace troupe
