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

#include <memory>

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

// Installs `router` for `system`'s remote sends (nullptr removes it). The runtime keeps every
// router it was given alive until it is destroyed, so a sender that loaded the router just before
// it was replaced still calls a live object.
void SetRemoteRouter(ActorSystem& system, std::shared_ptr<RemoteRouter> router);

// Routes `ev` (recipient on another node) through `system`'s installed router, or reports it
// Undelivered{kNoRoute} when there is none. What Deliver does for a node without a driver; a
// driver that wants the real interconnect under simulation calls it from RouteRemote.
void RouteThroughRouter(ActorSystem& system, EventHandlePtr ev);

}  // namespace troupe::internal
