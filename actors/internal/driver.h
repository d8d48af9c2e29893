// SPDX-License-Identifier: Apache-2.0
//
// Driver: what replaces a node's threads when something else runs it.
//
// A runtime created with a driver starts no worker and no scheduler thread. Instead (without a
// driver → with one):
//   - Send, timers' sends included: Deliver at once → OnSend, which may Deliver;
//   - a recipient on another node (rule 1): Undelivered{kNoRoute} → RouteRemote;
//   - a mailbox became scheduled: its pool's ready queue → MailboxReady;
//   - a delayed send: the scheduler thread → Schedule;
//   - Now(): absl::Now() → Now;
//   - the pending-timer counter: the scheduler's → PendingTimers.
// The deterministic test runtime (actors/testing/) is the driver: it runs every node of a test on
// one thread, in an order drawn from a seeded generator, under simulated time.
//
// Thread-safety: a driver is called on whatever thread calls into the runtime; the test runtime
// calls everything from its own single thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

#include "actors/event.h"
#include "actors/timer.h"
#include "proto/config.pb.h"

namespace troupe {
class ActorSystem;
}  // namespace troupe

namespace troupe::internal {

class Mailbox;
class Runtime;

class Driver {
 public:
  Driver() = default;
  virtual ~Driver() = default;
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;
  Driver(Driver&&) = delete;
  Driver& operator=(Driver&&) = delete;

  // Sees every event sent on `runtime`'s node; passes it on with `runtime->Deliver` (or drops,
  // delays or copies it).
  virtual void OnSend(Runtime* runtime, EventHandlePtr ev) = 0;
  // Takes an event whose recipient lives on another node.
  virtual void RouteRemote(Runtime* runtime, EventHandlePtr ev) = 0;
  // Takes a mailbox the caller moved to kScheduled: the driver becomes its reader.
  virtual void MailboxReady(Runtime* runtime, Mailbox* mailbox) = 0;
  // Delivers `ev` (through OnSend) after `delay` unless the cookie is cancelled first.
  virtual TimerCookie Schedule(Runtime* runtime, absl::Duration delay, EventHandlePtr ev) = 0;
  // Returns the node's clock.
  virtual absl::Time Now() const = 0;
  // Returns the number of `runtime`'s delayed sends not yet due (cancelled ones included).
  virtual size_t PendingTimers(const Runtime* runtime) const = 0;
};

// Creates a node run by `driver` (which must outlive it). Local ids start at `first_local_id`, so
// a driver can make ids reproducible and keep a restarted node's ids apart from the old ones.
absl::StatusOr<std::unique_ptr<ActorSystem>> CreateDrivenSystem(
    const proto::ActorSystemConfig& config, Driver* driver, uint64_t first_local_id);

// Returns the runtime behind `system`, for its driver.
Runtime* RuntimeOf(const ActorSystem& system);

}  // namespace troupe::internal
