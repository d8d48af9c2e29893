// SPDX-License-Identifier: Apache-2.0
//
// Helpers shared by the test binaries (namespace troupe::testutil): a small node config,
// sanitizer-aware sizes and deadlines, bounded waits, the EvValue/EvKick test events, and the
// shared Recorder (actors/testing/actors.h) bound to EvValue with an Inbox that waits
// WaitTimeout(). Interconnect helpers are in ut/interconnect/ic_test_util.h, socket probes in
// ut/integration/socket_util.h, pool helpers in ut/actors/scheduling_util.h (same namespace).
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
#include "actors/testing/actors.h"
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

// A handle of EvValue{value} to `recipient`, with `value` as cookie too.
inline EventHandlePtr ValueTo(const ActorId& recipient, uint64_t value,
                              const ActorId& sender = ActorId(), uint32_t flags = kNoFlags) {
  return std::make_unique<EventHandle>(recipient, sender, std::make_unique<EvValue>(value), flags,
                                       value);
}

// -- Inbox and Recorder ---------------------------------------------------------------------------

// The shared test actors' Recorder (actors/testing/actors.h), with EvValue::value in
// Received::value and waits bounded by WaitTimeout().
using Received = testing::Received;
using Recorder = testing::Recorder<EvValue>;

// A testing::Inbox whose waits default to WaitTimeout() (scaled under sanitizers).
class Inbox : public testing::Inbox {
 public:
  Inbox() : testing::Inbox(WaitTimeout()) {}
};

// Describes `ev` as a Received (called from the handler that holds it).
inline Received Describe(EventHandle& ev) { return testing::Describe<EvValue>(ev); }

// Returns the values of the EvValue events in `events`, in order.
inline std::vector<uint64_t> Values(const std::vector<Received>& events) {
  std::vector<uint64_t> values;
  for (const Received& r : events) {
    if (r.type == kEvValue) {
      values.push_back(r.value);
    }
  }
  return values;
}

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
