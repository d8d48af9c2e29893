// SPDX-License-Identifier: Apache-2.0
//
// Which protocol two nodes speak: the versions and optional features each announces in its
// handshake, and what a session between them uses.
//
// Every handshake announces a range of protocol versions, oldest to newest, and a list of
// optional features by name. A session uses the newest version both sides speak and only the
// features both announce; two nodes whose ranges do not overlap refuse each other at the
// handshake, with both ranges named in the reason. A feature this node does not know is ignored.
//
//   | version | what it is                                               | spoken by releases  |
//   |---------|----------------------------------------------------------|---------------------|
//   | 3       | frames of wire layout 3 (wire.h: compact records,        | 0.1.0 and later     |
//   |         | chunked large events, the leaving frames); the first to  |                     |
//   |         | announce a range                                          |                     |
//
//   | feature | what the session does with it                                                 |
//   |---------|-------------------------------------------------------------------------------|
//   | "leave" | a node that shuts down tells the peer it is leaving and says goodbye, and the |
//   |         | peer ends the session at once (interconnect.h, "Leaving"). Without it on both |
//   |         | sides, the leaving node still handles what it accepted, then closes, and the  |
//   |         | peer learns of it as of a lost connection                                     |
//
// Compatibility (docs/operating.md, "Upgrading a cluster"): each release speaks the newest
// version of the release before it, so a cluster upgrades one release at a time, node by node,
// under load. A release drops a version only after a release that speaks its successor.
//
// Thread-safety: constants and a value type.
//
// Example (a test that runs this build as if it were the next release):
//
//   troupe::node::NodeOptions options;
//   options.interconnect.protocol = troupe::interconnect::ProtocolRange{
//       .oldest = 3, .newest = 4, .features = {"leave"}};
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace troupe::interconnect {

// The oldest and newest protocol versions this build speaks.
inline constexpr uint32_t kOldestProtocolVersion = 3;
inline constexpr uint32_t kNewestProtocolVersion = 3;

// The optional features this build has (see the table above).
inline constexpr const char* kFeatureLeave = "leave";

// What a node announces in its handshakes.
struct ProtocolRange {
  uint32_t oldest = kOldestProtocolVersion;
  uint32_t newest = kNewestProtocolVersion;
  std::vector<std::string> features = {kFeatureLeave};
};

}  // namespace troupe::interconnect
