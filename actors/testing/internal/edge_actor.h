// SPDX-License-Identifier: Apache-2.0
//
// EdgeActor: the test body's mailbox inside a node (TestRuntime::AllocateEdgeActor).
//
// It keeps whatever it receives, in arrival order, in the runtime's edge queue for its id, where
// GrabEdgeEvent and TakeEdgeEvents find it. The queues belong to the runtime, not to the actor, so
// events already kept survive the actor (a killed node's queues are dropped with it). Private to
// troupe::testing; not installed.
//
// Thread-safety: actor-confined; its queue is read by the test body between dispatch calls.
#pragma once

#include <deque>
#include <utility>

#include "absl/container/flat_hash_map.h"

#include "actors/actor.h"
#include "actors/actor_id.h"
#include "actors/event.h"

namespace troupe::testing {

// Events kept by edge actors, per edge actor.
using EdgeQueues = absl::flat_hash_map<ActorId, std::deque<EventHandlePtr>>;

class EdgeActor final : public Actor {
 public:
  // Keeps events in `(*edges)[SelfId()]`; `edges` must outlive the actor.
  explicit EdgeActor(EdgeQueues* edges) : Actor(&EdgeActor::StateWork), edges_(edges) {}

 private:
  TROUPE_STATE(StateWork) { (*edges_)[SelfId()].push_back(std::move(ev)); }

  EdgeQueues* edges_;
};

}  // namespace troupe::testing
