// SPDX-License-Identifier: Apache-2.0
//
// Node hooks: the one seam through which libraries built on a node — the interconnect, a
// monitoring page, a membership service — reach its runtime. For extensions, not for actors:
// actors use Actor and ActorSystem.
//
// What an extension may do with a node, and nothing else:
//   | hook                 | what for                                                          |
//   |----------------------|-------------------------------------------------------------------|
//   | RemoteRouter         | take events whose recipient lives on another node (delivery rule  |
//   | SetRemoteRouter      | 1); the interconnect installs one per node. Without one such      |
//   |                      | events are reported Undelivered{kNoRoute}.                        |
//   | RouteThroughRouter   | hand an event to the installed router (the deterministic test     |
//   |                      | runtime does so to run the real interconnect under simulation)    |
//   | ReportUndelivered    | apply delivery rule 3 to an event the extension cannot deliver:   |
//   |                      | forward target, else Undelivered to a tracking sender, else drop  |
//   |                      | and count                                                         |
//   | MetricsOf            | the node's metrics registry (actors/metrics.h): publish an         |
//   |                      | extension's counters, or walk every counter of the node            |
// A node run by a driver (the deterministic test runtime) asks its driver for rule 1 instead of
// the router.
//
// Thread-safety: thread-safe. RemoteRouter::Route is called on whatever thread sends,
// concurrently; implementations must be thread-safe and must not block.
//
// Example (an extension that refuses every remote event):
//
//   class Refuser final : public troupe::RemoteRouter {
//    public:
//     explicit Refuser(troupe::ActorSystem* system) : system_(system) {}
//     void Route(troupe::EventHandlePtr ev) override {
//       troupe::ReportUndelivered(*system_, std::move(ev), troupe::UndeliveredReason::kNoRoute);
//     }
//    private:
//     troupe::ActorSystem* system_;
//   };
//   troupe::SetRemoteRouter(*system, std::make_shared<Refuser>(system.get()));
#pragma once

#include <memory>

#include "actors/event.h"
#include "actors/events.h"

namespace troupe {

class ActorSystem;
class MetricsRegistry;

class RemoteRouter {
 public:
  RemoteRouter() = default;
  virtual ~RemoteRouter() = default;
  RemoteRouter(const RemoteRouter&) = delete;
  RemoteRouter& operator=(const RemoteRouter&) = delete;
  RemoteRouter(RemoteRouter&&) = delete;
  RemoteRouter& operator=(RemoteRouter&&) = delete;

  // Takes `ev` (recipient on another node) toward its node. It owns the event from here: an event
  // it cannot route must go through ReportUndelivered.
  virtual void Route(EventHandlePtr ev) = 0;
};

// Installs `router` for `system`'s remote sends (nullptr removes it). The node keeps every router
// it was given alive until it is destroyed, so a sender that loaded the router just before it was
// replaced still calls a live object.
void SetRemoteRouter(ActorSystem& system, std::shared_ptr<RemoteRouter> router);

// Routes `ev` (recipient on another node) through `system`'s installed router, or reports it
// Undelivered{kNoRoute} when there is none.
void RouteThroughRouter(ActorSystem& system, EventHandlePtr ev);

// Applies delivery rule 3 to `ev`: its forward target if it has one, else EvUndelivered{reason}
// to a sender that tracked it, else the event is dropped and counted in dropped_events. `unsure`
// marks an event whose fate is unknown (a session died with it in flight): it is reported to a
// sender that tracked it or asked for kGenerateUnsureUndelivered.
void ReportUndelivered(ActorSystem& system, EventHandlePtr ev, UndeliveredReason reason,
                       bool unsure = false);

// Returns `system`'s metrics registry (lives as long as the system).
MetricsRegistry& MetricsOf(ActorSystem& system);

}  // namespace troupe
