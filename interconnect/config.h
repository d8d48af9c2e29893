// SPDX-License-Identifier: Apache-2.0
//
// Checking and completing the interconnect's section of a node's configuration
// (`proto/config.proto`, InterconnectConfig): the static node table, the cluster id, the session
// timings and the byte limits. Interconnect::Start runs both on the system's config, so a bad
// field fails the start naming it; troupe::node::ValidateConfig (node/config.h) runs
// ValidateConfig with the other layers' checks. The membership fields `etcd`, `listen` and
// `advertise` are checked by the node layer and not looked at here.
//
// ValidateConfig returns kInvalidArgument with a message naming the field by its path from the
// top of the config, e.g. `interconnect.nodes[1].port: must be between 1 and 65535, got 0`.
//
// Thread-safety: thread-safe (no shared state).
//
// Example:
//
//   if (absl::Status s = troupe::interconnect::ValidateConfig(config.interconnect()); !s.ok()) {
//     return s;
//   }
//   const proto::InterconnectConfig full =
//       troupe::interconnect::WithDefaults(config.interconnect());
#pragma once

#include "absl/status/status.h"

#include "proto/config.pb.h"

namespace troupe::interconnect {

// Checks the node table (ids unique and in range, host and port for every node but a client),
// the cluster id's length and the ranges of the timings and limits, each against the others'
// values or defaults.
absl::Status ValidateConfig(const proto::InterconnectConfig& config);

// Returns `config` with every default of its timings, limits and cluster id filled in (the values
// proto/config.proto documents). `config` should have passed ValidateConfig.
proto::InterconnectConfig WithDefaults(const proto::InterconnectConfig& config);

}  // namespace troupe::interconnect
