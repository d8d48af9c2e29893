// SPDX-License-Identifier: Apache-2.0
//
// SessionSubscribers: the actors a proxy (proxy.h) tells about its session with one peer
// (kSubscribeOnSession senders and Interconnect::SubscribeSession callers): EvNodeConnected when
// the session comes up (at once for a subscriber that comes while it is up), EvNodeDisconnected
// when it ends, after which they are forgotten (actors/session_events.h).
//
// Thread-safety: thread-compatible (owned by one proxy actor).
#pragma once

#include <memory>
#include <set>

#include "actors/actor_id.h"
#include "actors/actor_system.h"
#include "actors/session_events.h"

namespace troupe::interconnect::internal {

class SessionSubscribers {
 public:
  explicit SessionSubscribers(NodeId peer) : peer_(peer) {}

  // Adds `who`; when the session is `up`, a new subscriber hears so at once.
  void Add(ActorSystem& system, const ActorId& who, bool up) {
    if (subscribers_.insert(who).second && up) {
      system.Send(who, std::make_unique<EvNodeConnected>(peer_));
    }
  }
  // The session came up.
  void Connected(ActorSystem& system) const {
    for (const ActorId& subscriber : subscribers_) {
      system.Send(subscriber, std::make_unique<EvNodeConnected>(peer_));
    }
  }
  // The session ended (as `left`: the peer said goodbye): every subscriber hears so and is
  // forgotten.
  void Disconnected(ActorSystem& system, bool left = false) {
    for (const ActorId& subscriber : subscribers_) {
      system.Send(subscriber, std::make_unique<EvNodeDisconnected>(peer_, left));
    }
    subscribers_.clear();
  }
  bool empty() const { return subscribers_.empty(); }

 private:
  const NodeId peer_;
  // Ordered: they hear of the session in one order, so a run under the deterministic test runtime
  // replays (a hash set's order differs between processes).
  std::set<ActorId> subscribers_;
};

}  // namespace troupe::interconnect::internal
