// SPDX-License-Identifier: Apache-2.0
//
// Session events (interconnect event space): what a sender learns about the session to a node.
//
// An actor that sends to a remote actor with `kSubscribeOnSession` subscribes to the session
// between its node and the recipient's node:
//   - `EvNodeConnected{node}` arrives once the session is up (at once when it already is); one
//     subscription yields it once per session, however many subscribed sends follow;
//   - `EvNodeDisconnected{node}` arrives when that session dies (peer dead, restarted, partitioned,
//     timed out) or cannot be established, or when the node left the cluster (`left`: it said
//     goodbye as it shut down); the subscription ends with it, so the next subscribed send
//     subscribes again to whatever session comes next.
// Both come from the local node (the sender id is empty) and never cross nodes. The interconnect
// and the deterministic test runtime's simulated interconnect both follow this contract.
//
// Thread-safety: value types; thread-compatible.
#pragma once

#include <string>

#include "absl/strings/str_cat.h"

#include "actors/actor_id.h"
#include "actors/event.h"

namespace troupe {

enum SessionEventType : EventType {
  kEvNodeConnected = EventSpaceBegin(kInterconnectEventSpace) + 1,
  kEvNodeDisconnected,
  kEvSessionEventsEnd,
};
static_assert(InEventSpace(kEvSessionEventsEnd - 1, kInterconnectEventSpace),
              "session events overflow");

// The session to `node` is up.
struct EvNodeConnected final : EventLocal<EvNodeConnected, kEvNodeConnected> {
  explicit EvNodeConnected(NodeId node_value) : node(node_value) {}
  std::string ToString() const override { return absl::StrCat("node-connected(", node, ")"); }
  NodeId node;
};

// The session to `node` died or could not be established, or `node` left the cluster.
struct EvNodeDisconnected final : EventLocal<EvNodeDisconnected, kEvNodeDisconnected> {
  explicit EvNodeDisconnected(NodeId node_value, bool node_left = false)
      : node(node_value), left(node_left) {}
  std::string ToString() const override {
    return absl::StrCat("node-disconnected(", node, left ? ", left" : "", ")");
  }
  NodeId node;
  // The node ended the session itself as it left the cluster (a graceful shutdown), rather than
  // being lost (dead, partitioned, restarted).
  bool left;
};

}  // namespace troupe
