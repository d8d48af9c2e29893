// SPDX-License-Identifier: Apache-2.0
//
// RemoteRouter: where a node's runtime hands events whose recipient lives on another node
// (delivery rule 1). The interconnect installs one per node; without one such events are reported
// Undelivered{kNoRoute}. A node run by a driver (the deterministic test runtime) asks its driver
// instead.
//
// Thread-safety: Route is called on whatever thread sends, concurrently; implementations must be
// thread-safe and must not block (they typically hand the event to a proxy actor).
#pragma once

#include "actors/event.h"

namespace troupe {
class ActorSystem;
}  // namespace troupe

namespace troupe::internal {

class RemoteRouter {
 public:
  RemoteRouter() = default;
  virtual ~RemoteRouter() = default;
  RemoteRouter(const RemoteRouter&) = delete;
  RemoteRouter& operator=(const RemoteRouter&) = delete;
  RemoteRouter(RemoteRouter&&) = delete;
  RemoteRouter& operator=(RemoteRouter&&) = delete;

  // Takes `ev` (recipient on another node) toward its node. It owns the event from here: an event
  // it cannot route must go through the delivery rules' rule 3 (Runtime::Undeliverable).
  virtual void Route(EventHandlePtr ev) = 0;
};

// Installs `router` for `system`'s remote sends (nullptr removes it). The router must outlive its
// installation; remove it (or stop the system) before destroying it.
void SetRemoteRouter(ActorSystem& system, RemoteRouter* router);

}  // namespace troupe::internal
