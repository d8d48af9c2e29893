// SPDX-License-Identifier: Apache-2.0
//
// Node hooks: the one seam through which libraries built on a node — the interconnect, a
// monitoring page, a membership service — reach its runtime. For extensions, not for actors:
// actors use Actor and ActorSystem.
//
// What an extension may do with a node beyond the public ActorSystem (whose metrics() registry is
// where an extension publishes its counters), and nothing else:
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
//   | IsMailboxIdle        | tell whether a local actor's mailbox has work (a load hint for    |
//   |                      | routers choosing the least busy of several actors)                |
//   | IoPoller             | an I/O loop run by a pool's idle workers instead of a thread of   |
//   | AttachIoPoller       | its own (the TCP transport's): bytes that arrive wake the worker  |
//   | DetachIoPoller       | that will run their actors, with no hand-off between threads      |
//   | LeaseSystem          | say that the extension must end before the node: destroying the   |
//   |                      | ActorSystem while a lease lives aborts, naming the extension      |
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

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"

#include "actors/event.h"
#include "actors/events.h"

namespace troupe {

class ActorSystem;

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

// Returns true when the mailbox of `actor`, an actor of `system`'s node, is idle: no event queued
// in it (for it or for an actor sharing its mailbox) and none being handled; false when it has
// work. nullopt for an empty id, a service id, an id of another node, or a mailbox slot that was
// never handed out. A snapshot, stale as soon as it is read, and a hint only: after the actor
// ended its slot may serve another actor. The mailbox keeps no count of its events (counting
// would cost every send an atomic), so this is the load a caller can see for free: one acquire
// load.
std::optional<bool> IsMailboxIdle(ActorSystem& system, const ActorId& actor);

// An I/O event loop (an Asio io_context, an epoll set) that the workers of one pool run instead
// of a thread of its own. A worker of the pool that runs out of mailboxes polls it while it spins
// and then parks in Wait instead of on the pool's semaphore; a busy worker polls it every few
// activations, so I/O is never left waiting for an idle moment. One worker at a time is inside
// Poll or Wait, and each entry happens after the previous one ended, so the loop's state needs no
// lock of its own (as with a single I/O thread). Handlers that send events to actors of the same
// pool queue them on the polling worker, which runs them next.
//
// Thread-safety: Poll and Wait are called by one thread at a time; Interrupt by any thread.
class IoPoller {
 public:
  IoPoller() = default;
  virtual ~IoPoller() = default;
  IoPoller(const IoPoller&) = delete;
  IoPoller& operator=(const IoPoller&) = delete;
  IoPoller(IoPoller&&) = delete;
  IoPoller& operator=(IoPoller&&) = delete;

  // Runs the handlers that are ready now without blocking; returns how many ran.
  virtual size_t Poll() = 0;
  // Blocks until a handler ran (I/O became ready, a handler was posted, Interrupt was called),
  // then runs every other handler that is ready.
  virtual void Wait() = 0;
  // Makes the Wait in progress return, or the next one if none is: an Interrupt is never lost.
  virtual void Interrupt() = 0;
};

// Has the workers of `pool` run `poller` (see IoPoller) until DetachIoPoller; `poller` must live
// until then. kNotFound for an unknown pool; kAlreadyExists when the pool runs another poller;
// kFailedPrecondition for a node run by a driver (the deterministic test runtime starts no
// workers).
absl::Status AttachIoPoller(ActorSystem& system, std::string_view pool, IoPoller* poller);
// Stops `system`'s workers from running `poller`; returns once none is inside it (so never call
// it from one of the poller's own handlers: it would wait for itself). A no-op for a poller that
// is not attached. Call it before the ActorSystem goes away (a stopped system's workers run it
// no more).
void DetachIoPoller(ActorSystem& system, IoPoller* poller);

// An extension's claim that it still uses a node (see LeaseSystem). Move-only; destroying it (or
// assigning over it) gives the claim back.
class SystemLease {
 public:
  SystemLease() = default;
  ~SystemLease() { Release(); }
  SystemLease(const SystemLease&) = delete;
  SystemLease& operator=(const SystemLease&) = delete;
  SystemLease(SystemLease&& other) noexcept
      : system_(std::exchange(other.system_, nullptr)), id_(other.id_) {}
  SystemLease& operator=(SystemLease&& other) noexcept {
    if (this != &other) {
      Release();
      system_ = std::exchange(other.system_, nullptr);
      id_ = other.id_;
    }
    return *this;
  }

  // Gives the claim back now (a no-op for an empty lease).
  void Release();

 private:
  friend SystemLease LeaseSystem(ActorSystem& system, std::string name);
  SystemLease(ActorSystem* system, uint64_t id) : system_(system), id_(id) {}

  ActorSystem* system_ = nullptr;
  uint64_t id_ = 0;
};

// Records that the extension `name` uses `system` until the returned lease is destroyed. An
// ActorSystem destroyed while a lease lives aborts the process with a message naming `name` and
// saying to destroy it first: an extension that outlived its node would touch freed memory, later
// and far from the mistake. The interconnect takes one; troupe::node::Node (node/node.h) orders
// the teardown so that users do not have to.
[[nodiscard]] SystemLease LeaseSystem(ActorSystem& system, std::string name);

}  // namespace troupe
