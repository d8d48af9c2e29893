// SPDX-License-Identifier: Apache-2.0
//
// Test actors: the small actors that tests, benchmarks and examples keep writing — an echo, a
// ping-pong pair, and a recorder that copies what it receives into a thread-safe inbox. Header
// only; they use the public actors API and nothing else (no GoogleTest), so they work on a real
// ActorSystem and under troupe::testing::TestRuntime alike. Target `troupe::test_actors`.
//
// The actors are templates over the event types they exchange, so that each user keeps its own
// events (local or EventPB):
//   - Echo<Ping, Pong>: answers every Ping with a Pong carrying the ping's body and cookie.
//   - Ponger<Ball>: returns every Ball to its sender (Forward: the same handle, no allocation).
//   - Pinger<Ball>: serves one Ball to a ponger and returns it on every return until the game is
//     over (a number of round trips, or a stop flag), then notifies.
//   - Recorder<ValueEvent>: copies every event it receives (as a Received) into an Inbox.
//
// Guarantees: each actor does what its comment says and nothing else; an event it does not know
// goes to Actor::Unhandled (so EvPoison ends it). Order is the runtime's: per sender→recipient
// FIFO. The actors keep raw pointers to what their constructors take (inbox, flags, counters,
// notifications): those must outlive the actor.
//
// Thread-safety: the actors are actor-confined. Inbox is thread-safe. Pinger's stop flag,
// round-trip counter and notification may be read or set from any thread (see Pinger::Options).
//
// Example:
//
//   enum : troupe::EventType { kEvPing = troupe::EventSpaceBegin(troupe::kUserEventSpace) };
//   struct EvPing : troupe::EventPB<EvPing, MyPayload, kEvPing> {};
//
//   troupe::testing::TestRuntime runtime({.nodes = 2});
//   troupe::ActorId echo =
//       runtime.Register(std::make_unique<troupe::testing::Echo<EvPing>>(), /*node=*/2);
//   troupe::testing::Inbox inbox;
//   troupe::ActorId client =
//       runtime.Register(std::make_unique<troupe::testing::Recorder<>>(&inbox), /*node=*/1);
//   runtime.Send(echo, std::make_unique<EvPing>(), client);
//   runtime.DispatchEvents();
//   EXPECT_EQ(inbox.OfType(kEvPing).size(), 1u);
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

#include "actors/actor.h"
#include "actors/actor_id.h"
#include "actors/event.h"
#include "actors/events.h"
#include "actors/sync.h"

namespace troupe::testing {

// -- Echo -----------------------------------------------------------------------------------------

// Answers every `Ping` with a `Pong` (may be the same type) sent to the ping's sender, carrying
// the ping's body (`record`, as EventPB events have) and cookie. Other events go to Unhandled.
template <typename Ping, typename Pong = Ping>
class Echo final : public Actor {
 public:
  Echo() : Actor(&Echo::StateWork) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(Ping, HandlePing);
      default:
        Unhandled(ev);
    }
  }

  void HandlePing(EventPtr<Ping> ev) {
    auto pong = std::make_unique<Pong>();
    pong->record = ev.Get()->record;
    Send(ev->sender(), std::move(pong), kNoFlags, ev->cookie());
  }
};

// -- Ponger and Pinger ----------------------------------------------------------------------------

// Returns every `Ball` to its sender: Forward reuses the handle, so a bounce allocates nothing and
// the ball keeps naming the pinger as its sender. Other events go to Unhandled.
template <typename Ball>
class Ponger final : public Actor {
 public:
  Ponger() : Actor(&Ponger::StateWork) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      case Ball::kEventType:
        Forward(ev->sender(), ev);
        break;
      default:
        Unhandled(ev);
    }
  }
};

// Serves one `Ball` (default-constructed) to `ponger` from Bootstrap and forwards it back on every
// return. The game is over after `rounds` round trips or at the first return after `stop` was set;
// the Pinger then drops the ball, adds its last round trips to `round_trips` and notifies `done`
// (once). It stays alive until poisoned or its node stops. Other events go to Unhandled.
template <typename Ball>
class Pinger final : public Actor {
 public:
  // Round trips are published in steps of this many (and once at the end): a shared counter
  // bumped on every bounce would cost more than the bounce.
  static constexpr uint64_t kPublishEvery = 1024;

  struct Options {
    // Round trips to play.
    uint64_t rounds = std::numeric_limits<uint64_t>::max();
    // When set (from any thread; read relaxed: a late look costs one more round trip), the game
    // ends at the next return.
    const std::atomic<bool>* stop = nullptr;
    // Where the round trips played are added (relaxed), in steps of kPublishEvery.
    std::atomic<uint64_t>* round_trips = nullptr;
    // Notified when the game is over.
    Notification* done = nullptr;
  };

  Pinger(ActorId ponger, Options options)
      : Actor(&Pinger::StateWork), ponger_(ponger), options_(options) {}

 private:
  void Bootstrap() override {
    if (options_.rounds == 0) {
      Finish();
      return;
    }
    Send(std::make_unique<EventHandle>(ponger_, SelfId(), std::make_unique<Ball>()));
  }

  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      case Ball::kEventType:
        HandleReturn(ev);
        break;
      default:
        Unhandled(ev);
    }
  }

  void HandleReturn(EventHandlePtr& ev) {
    ++played_;
    if (++unpublished_ == kPublishEvery) {
      Publish();
    }
    // relaxed: the flag only ends the game; it publishes no data.
    const bool stopped = options_.stop != nullptr && options_.stop->load(std::memory_order_relaxed);
    if (played_ >= options_.rounds || stopped) {
      Finish();  // the ball is freed with `ev`
      return;
    }
    Forward(ponger_, ev);
  }

  void Publish() {
    if (options_.round_trips != nullptr && unpublished_ > 0) {
      // relaxed: a running total that readers poll; the notification orders the last add.
      options_.round_trips->fetch_add(unpublished_, std::memory_order_relaxed);
    }
    unpublished_ = 0;
  }

  void Finish() {
    Publish();
    if (options_.done != nullptr) {
      options_.done->Notify();
    }
  }

  const ActorId ponger_;
  const Options options_;
  uint64_t played_ = 0;
  uint64_t unpublished_ = 0;
};

// -- Recorder and Inbox ---------------------------------------------------------------------------

// What a Recorder saw of one event.
struct Received {
  EventType type = 0;
  ActorId sender;
  ActorId recipient;
  uint64_t cookie = 0;
  uint32_t flags = 0;
  // The trace id the event carried (0: none).
  uint64_t trace_id = 0;
  // The recorder's ValueEvent::value, or EvWakeup::tag (0 for other events).
  uint64_t value = 0;
  // EvUndelivered fields (reason 0 for other events).
  UndeliveredReason reason = static_cast<UndeliveredReason>(0);
  EventType source_type = 0;
  uint64_t undelivered_cookie = 0;
  bool unsure = false;
  // When it was received: absl::Now() from Describe, the node's clock (Actor::Now: simulated under
  // TestRuntime) from a Recorder.
  absl::Time at;
};

// The list an Inbox keeps, shared with the Recorders that write to it: a Recorder may outlive the
// Inbox it was given (a node torn down after the test's Inbox tells its session subscribers the
// sessions ended), and what it records then lands here instead of in freed memory.
class InboxRecords {
 public:
  // Appends `received`.
  void Add(const Received& received) ABSL_LOCKS_EXCLUDED(mu_) {
    MutexLock lock(&mu_);
    events_.push_back(received);
  }

 private:
  friend class Inbox;
  mutable Mutex mu_;
  std::vector<Received> events_ ABSL_GUARDED_BY(mu_);
};

// A thread-safe list of received events that tests wait on. Waits block on the mutex with a
// deadline (no polling, no sleep).
class Inbox {
 public:
  // `default_timeout` bounds the waits that name no timeout of their own.
  explicit Inbox(absl::Duration default_timeout = absl::Seconds(30))
      : default_timeout_(default_timeout), records_(std::make_shared<InboxRecords>()) {}

  // Appends `received`.
  void Add(const Received& received) { records_->Add(received); }

  // The list itself, for a writer that may outlive this Inbox (as Recorder does).
  std::shared_ptr<InboxRecords> records() const { return records_; }

  // Waits until `predicate(events)` holds or `timeout` (default: the inbox's) passes; returns
  // whether it holds. `predicate` runs under the inbox's lock: it must not call the inbox.
  bool WaitFor(const std::function<bool(const std::vector<Received>&)>& predicate,
               absl::Duration timeout) {
    InboxRecords& records = *records_;
    MutexLock lock(&records.mu_);
    auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(records.mu_) {
      return predicate(records.events_);
    };
    return records.mu_.AwaitWithDeadline(absl::Condition(&ready), absl::Now() + timeout);
  }
  bool WaitFor(const std::function<bool(const std::vector<Received>&)>& predicate) {
    return WaitFor(predicate, default_timeout_);
  }

  // Waits until at least `count` events of `type` arrived, or `timeout` (default: the inbox's)
  // passes; returns whether they did.
  bool WaitForType(EventType type, size_t count, absl::Duration timeout) {
    return WaitFor(
        [type, count](const std::vector<Received>& events) {
          size_t seen = 0;
          for (const Received& r : events) {
            seen += r.type == type ? 1 : 0;
          }
          return seen >= count;
        },
        timeout);
  }
  bool WaitForType(EventType type, size_t count = 1) {
    return WaitForType(type, count, default_timeout_);
  }

  // Returns every event received so far, in arrival order.
  std::vector<Received> Snapshot() const {
    const InboxRecords& records = *records_;
    MutexLock lock(&records.mu_);
    return records.events_;
  }

  // Returns the events of `type` received so far, in arrival order.
  std::vector<Received> OfType(EventType type) const {
    const InboxRecords& records = *records_;
    MutexLock lock(&records.mu_);
    std::vector<Received> out;
    for (const Received& r : records.events_) {
      if (r.type == type) {
        out.push_back(r);
      }
    }
    return out;
  }

 private:
  const absl::Duration default_timeout_;
  const std::shared_ptr<InboxRecords> records_;
};

// Describes `ev` as a Received, with `at` = absl::Now(). `ValueEvent` (an event type with a
// `value` member, or void) names the event whose value lands in Received::value.
template <typename ValueEvent = void>
Received Describe(EventHandle& ev) {
  Received r;
  r.type = ev.type();
  r.sender = ev.sender();
  r.recipient = ev.recipient();
  r.cookie = ev.cookie();
  r.flags = ev.flags();
  r.trace_id = ev.trace_id();
  r.at = absl::Now();
  if constexpr (!std::is_void_v<ValueEvent>) {
    if (auto* value = ev.Get<ValueEvent>()) {
      r.value = value->value;
      return r;
    }
  }
  if (auto* wakeup = ev.Get<EvWakeup>()) {
    r.value = wakeup->tag;
  } else if (auto* undelivered = ev.Get<EvUndelivered>()) {
    r.reason = undelivered->reason;
    r.source_type = undelivered->source_type;
    r.undelivered_cookie = undelivered->cookie;
    r.unsure = undelivered->unsure;
  }
  return r;
}

// Copies every event it receives (Bootstrap excluded) into `inbox`, as Describe<ValueEvent> with
// `at` from the node's clock. EvPoison is recorded, then goes to Unhandled, so poison ends it.
// Notifies `destroyed` (if given) from its destructor. It shares the inbox's list, so it may
// outlive the Inbox (events after that are kept where nobody reads them).
template <typename ValueEvent = void>
class Recorder : public Actor {
 public:
  explicit Recorder(Inbox* inbox, Notification* destroyed = nullptr)
      : Actor(&Recorder::StateWork), records_(inbox->records()), destroyed_(destroyed) {}
  ~Recorder() override {
    if (destroyed_ != nullptr) {
      destroyed_->Notify();
    }
  }
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;
  Recorder(Recorder&&) = delete;
  Recorder& operator=(Recorder&&) = delete;

 private:
  TROUPE_STATE(StateWork) {
    Received received = Describe<ValueEvent>(*ev);
    received.at = Now();
    records_->Add(received);
    if (ev->type() == kEvPoison) {
      Unhandled(ev);
    }
  }

  const std::shared_ptr<InboxRecords> records_;
  Notification* destroyed_;
};

}  // namespace troupe::testing
