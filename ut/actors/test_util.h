// SPDX-License-Identifier: Apache-2.0
//
// Helpers shared by the actors_ut tests: a small node config, sanitizer-aware sizes and deadlines,
// bounded waits, and a Recorder actor that copies what it receives into a thread-safe Inbox.
//
// Nothing here sleeps: waits block on troupe::Mutex conditions with a deadline, or poll with
// std::this_thread::yield() for a bounded time.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/actor.h"
#include "actors/actor_id.h"
#include "actors/actor_system.h"
#include "actors/event.h"
#include "actors/events.h"
#include "actors/sync.h"
#include "proto/config.pb.h"

#if defined(__SANITIZE_THREAD__)
#define TROUPE_UT_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TROUPE_UT_TSAN 1
#endif
#endif

#if defined(__SANITIZE_ADDRESS__)
#define TROUPE_UT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TROUPE_UT_ASAN 1
#endif
#endif

namespace troupe::testutil {

#if defined(TROUPE_UT_TSAN)
inline constexpr bool kUnderTsan = true;
#else
inline constexpr bool kUnderTsan = false;
#endif
#if defined(TROUPE_UT_ASAN)
inline constexpr bool kUnderAsan = true;
#else
inline constexpr bool kUnderAsan = false;
#endif
inline constexpr bool kUnderSanitizer = kUnderTsan || kUnderAsan;

// Scales a stress size down under sanitizers (TSan is ~5-20x slower, ASan ~2-3x), keeping at least
// `floor` so a stress test still stresses.
inline int64_t Scaled(int64_t n, int64_t floor = 1) {
  int64_t scaled = n;
  if (kUnderTsan) {
    scaled = n / 5;
  } else if (kUnderAsan) {
    scaled = n / 2;
  }
  return scaled < floor ? floor : scaled;
}

// Returns the deadline of one real-time wait: generous, because the box is a noisy 2-core machine
// and the tests also run under sanitizers. A passing test never waits this long.
inline absl::Duration WaitTimeout() {
  return kUnderSanitizer ? absl::Seconds(60) : absl::Seconds(30);
}

// Polls `predicate` (yielding between polls) until it holds or `timeout` passes; returns its last
// value. For state that has no notification (counters).
inline bool WaitUntil(const std::function<bool()>& predicate,
                      absl::Duration timeout = WaitTimeout()) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!predicate()) {
    if (absl::Now() >= deadline) {
      return predicate();
    }
    std::this_thread::yield();
  }
  return true;
}

// Returns a small node: System(1), User(2), Batch(1), IC(1) threads, short spin, 1 ms scheduler.
inline proto::ActorSystemConfig SmallConfig() {
  proto::ActorSystemConfig config;
  const std::pair<const char*, uint32_t> pools[] = {
      {"System", 1}, {"User", 2}, {"Batch", 1}, {"IC", 1}};
  for (const auto& [name, threads] : pools) {
    proto::PoolConfig* pool = config.add_pools();
    pool->set_name(name);
    pool->set_threads(threads);
    pool->set_spin_time_us(5);
  }
  config.set_default_pool("User");
  config.mutable_scheduler()->set_resolution_us(1000);
  return config;
}

// Creates a system from SmallConfig() (or `config`); fails the test and returns null on error.
inline std::unique_ptr<ActorSystem> MakeSystem(
    const proto::ActorSystemConfig& config = SmallConfig()) {
  absl::StatusOr<std::unique_ptr<ActorSystem>> system = ActorSystem::Create(config);
  if (!system.ok()) {
    ADD_FAILURE() << "ActorSystem::Create: " << system.status();
    return nullptr;
  }
  return std::move(*system);
}

// Returns the system's counters as one line, for failure messages of tests that time out.
inline std::string DescribeCounters(const ActorSystem& system) {
  const ActorSystemCounters c = system.Counters();
  std::string out = absl::StrCat("dropped=", c.dropped_events, " failed=", c.failed_actors,
                                 " mailboxes=", c.live_mailboxes, " timers=", c.pending_timers);
  for (const PoolCounters& pool : c.pools) {
    absl::StrAppend(&out, " | ", pool.name, ": events=", pool.events,
                    " activations=", pool.activations, " preemptions=", pool.budget_preemptions,
                    " parks=", pool.parks, " queued=", pool.queue_length);
  }
  return out;
}

// -- shared test events ---------------------------------------------------------------------------

enum : EventType {
  kEvValue = EventSpaceBegin(kUserEventSpace + 1),
  kEvKick,
  kEvTestEnd,
};
static_assert(InEventSpace(kEvTestEnd - 1, kUserEventSpace + 1));

// Carries one number.
struct EvValue final : EventLocal<EvValue, kEvValue> {
  explicit EvValue(uint64_t v = 0) : value(v) {}
  uint64_t value;
};

// A bodyless trigger.
struct EvKick final : EventLocal<EvKick, kEvKick> {};

// -- Inbox and Recorder ---------------------------------------------------------------------------

// What a Recorder saw of one event.
struct Received {
  EventType type = 0;
  ActorId sender;
  ActorId recipient;
  uint64_t cookie = 0;
  uint32_t flags = 0;
  // EvValue::value or EvWakeup::tag.
  uint64_t value = 0;
  // EvUndelivered fields (reason 0 for other events).
  UndeliveredReason reason = static_cast<UndeliveredReason>(0);
  EventType source_type = 0;
  uint64_t undelivered_cookie = 0;
  bool unsure = false;
  absl::Time at;
};

// A thread-safe list of received events that tests wait on.
class Inbox {
 public:
  void Add(Received received) ABSL_LOCKS_EXCLUDED(mu_) {
    troupe::MutexLock lock(&mu_);
    events_.push_back(std::move(received));
  }

  // Waits until `predicate(events)` holds or `timeout` passes; returns whether it holds.
  bool WaitFor(const std::function<bool(const std::vector<Received>&)>& predicate,
               absl::Duration timeout = WaitTimeout()) ABSL_LOCKS_EXCLUDED(mu_) {
    troupe::MutexLock lock(&mu_);
    auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return predicate(events_); };
    return mu_.AwaitWithDeadline(absl::Condition(&ready), absl::Now() + timeout);
  }

  // Waits until at least `count` events of `type` arrived.
  bool WaitForType(EventType type, size_t count = 1, absl::Duration timeout = WaitTimeout()) {
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

  std::vector<Received> Snapshot() const ABSL_LOCKS_EXCLUDED(mu_) {
    troupe::MutexLock lock(&mu_);
    return events_;
  }

  // Returns the events of `type` received so far.
  std::vector<Received> OfType(EventType type) const ABSL_LOCKS_EXCLUDED(mu_) {
    troupe::MutexLock lock(&mu_);
    std::vector<Received> out;
    for (const Received& r : events_) {
      if (r.type == type) {
        out.push_back(r);
      }
    }
    return out;
  }

 private:
  mutable troupe::Mutex mu_;
  std::vector<Received> events_ ABSL_GUARDED_BY(mu_);
};

// Describes `ev` as a Received (called from the handler that holds it).
inline Received Describe(EventHandle& ev) {
  Received r;
  r.type = ev.type();
  r.sender = ev.sender();
  r.recipient = ev.recipient();
  r.cookie = ev.cookie();
  r.flags = ev.flags();
  r.at = absl::Now();
  if (auto* value = ev.Get<EvValue>()) {
    r.value = value->value;
  } else if (auto* wakeup = ev.Get<EvWakeup>()) {
    r.value = wakeup->tag;
  } else if (auto* undelivered = ev.Get<EvUndelivered>()) {
    r.reason = undelivered->reason;
    r.source_type = undelivered->source_type;
    r.undelivered_cookie = undelivered->cookie;
    r.unsure = undelivered->unsure;
  }
  return r;
}

// Copies every event it receives (Bootstrap excluded) into an Inbox. EvPoison goes through
// Unhandled, so poison ends it. Notifies `destroyed` from its destructor.
class Recorder : public Actor {
 public:
  explicit Recorder(Inbox* inbox, troupe::Notification* destroyed = nullptr)
      : Actor(&Recorder::StateWork), inbox_(inbox), destroyed_(destroyed) {}
  ~Recorder() override {
    if (destroyed_ != nullptr) {
      destroyed_->Notify();
    }
  }

 private:
  TROUPE_STATE(StateWork) {
    Received received = Describe(*ev);
    received.at = Now();  // the node's clock: simulated under TestRuntime
    inbox_->Add(std::move(received));
    if (ev->type() == kEvPoison) {
      Unhandled(ev);
    }
  }

  Inbox* inbox_;
  troupe::Notification* destroyed_;
};

// Ends on EvPoison (through Unhandled), drops anything else, and sets `*destroyed` when destroyed.
class Mortal : public Actor {
 public:
  // Shared, so a test that fails before the actor ends leaves no dangling pointer behind.
  explicit Mortal(std::shared_ptr<bool> destroyed)
      : Actor(&Mortal::StateWork), destroyed_(std::move(destroyed)) {}
  ~Mortal() override { *destroyed_ = true; }

 private:
  TROUPE_STATE(StateWork) { Unhandled(ev); }

  std::shared_ptr<bool> destroyed_;
};

}  // namespace troupe::testutil
