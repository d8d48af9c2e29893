// SPDX-License-Identifier: Apache-2.0
//
// Loading and checking a whole node's configuration (`proto/config.proto`, protobuf text format):
// every section, each by the layer that reads it, so that a bad field anywhere is named before
// anything starts.
//
//   | section                                    | checked by                                   |
//   |--------------------------------------------|----------------------------------------------|
//   | node_id, pools, default_pool, scheduler,   | troupe::ValidateConfig (actors/config.h)     |
//   | log, max_mailboxes, max_services           |                                              |
//   | interconnect: node table, cluster id,      | troupe::interconnect::ValidateConfig         |
//   | timings, limits                            | (interconnect/config.h)                      |
//   | interconnect.etcd, .listen, .advertise     | here: membership in etcd (etcd_nameservice.h)|
//   |                                            | and where the node binds and is dialled      |
//   | monitoring                                 | here: the HTTP server (monitoring.h)         |
// Node::Start runs ValidateConfig before it starts anything. Errors are kInvalidArgument with a
// message naming the field (`interconnect.etcd.lease_ttl_s: must be between 2 and 3600, got 1`)
// or, for text that does not parse, the line and column; kNotFound / kPermissionDenied when the
// file cannot be read. Nothing here exits or aborts on bad input.
//
// Thread-safety: thread-safe (no shared state).
//
// Example:
//
//   absl::StatusOr<troupe::proto::ActorSystemConfig> config =
//       troupe::node::LoadConfigFile("node.conf");
//   if (!config.ok()) { std::cerr << config.status() << "\n"; return 3; }
//   auto node = troupe::node::Node::Start(*config);
#pragma once

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "proto/config.pb.h"

namespace troupe::node {

// Checks every section of `config` (see the table above). The node's own checks: etcd
// membership and a static table (interconnect.nodes) exclude each other; the etcd endpoints
// (`endpoint` or `endpoints`, not both) are "http://" or "https://" URLs of one scheme, with no
// duplicates; interconnect.etcd.tls goes with https:// endpoints, and its files can be read
// (ca_file required, cert_file and key_file together); lease_ttl_s, connect_timeout_ms and the
// ports are in their ranges; with etcd, a wildcard interconnect.listen.host needs
// interconnect.advertise.host, and advertise.port a fixed listen.port; advertise and
// listen.client are for etcd membership only.
absl::Status ValidateConfig(const proto::ActorSystemConfig& config);

// Returns whether `host` is an IP address that binds every interface ("0.0.0.0", "::", "[::]"):
// one the others cannot dial.
bool IsWildcardAddress(std::string_view host);

// Parses protobuf text format into a config and checks every section.
absl::StatusOr<proto::ActorSystemConfig> ParseConfig(std::string_view text);

// Reads and parses the file at `path` and checks every section; errors are prefixed with the
// path.
absl::StatusOr<proto::ActorSystemConfig> LoadConfigFile(const std::string& path);

// Returns `config` with the defaults of every section filled in: the actor system's
// (troupe::WithDefaults), the interconnect's (troupe::interconnect::WithDefaults) and, with
// interconnect.etcd, the lease, the connect timeout and where the node listens. `config` should
// have passed ValidateConfig.
proto::ActorSystemConfig WithDefaults(const proto::ActorSystemConfig& config);

}  // namespace troupe::node
