// SPDX-License-Identifier: Apache-2.0
//
// Delayed sends (Actor::Schedule, Actor::ScheduleWakeup, ActorSystem::Schedule) and TimerCookie
// cancellation; executor pool budgets and parking.
//
// The scheduling semantics run on troupe::testing::TestRuntime, under simulated time: when a
// delayed event fires (at exactly its delay there, so the tests assert exact times and take no
// wall-clock time), in deadline order, what Cancel prevents before and after the deadline, and
// that an event scheduled to a dead actor is reported undelivered.
// Real threads remain where the threads themselves are under test:
//   - ActivationBudgetKeepsBusyActorFromStarvingItsPool and IdleWorkersPark: the executor pools'
//     workers (budgets, parking), which do not exist under TestRuntime.
// Those wait in real time with deadlines (WaitUntil / WaitFor), never by sleeping. The real
// scheduler thread, whose checks are real-time windows, is tested in scheduler_timing_test.cc.
#include <atomic>
#include <cstdint>
#include <iterator>
#include <memory>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/actor.h"
#include "actors/actor_system.h"
#include "actors/event.h"
#include "actors/events.h"
#include "actors/sync.h"
#include "actors/testing/test_runtime.h"
#include "actors/timer.h"
#include "ut/actors/test_util.h"

namespace troupe {
namespace {

using testing::DispatchResult;
using testing::TestRuntime;
using testing::TestRuntimeOptions;
using testutil::Describe;
using testutil::EvValue;
using testutil::Inbox;
using testutil::kEvValue;
using testutil::MakeSystem;
using testutil::Received;
using testutil::Recorder;
using testutil::ValueTo;
using testutil::WaitTimeout;
using testutil::WaitUntil;

constexpr absl::Duration kWakeupDelay = absl::Milliseconds(40);
constexpr absl::Duration kOtherDelay = absl::Milliseconds(60);
constexpr absl::Duration kSelfDelay = absl::Milliseconds(80);

// One node configured like the real-thread tests' nodes.
TestRuntimeOptions SmallNode() { return {.config = testutil::SmallConfig()}; }

// What a Delayer scheduled and received; `fired[i].at` is the node's clock (Actor::Now) when it
// handled the event.
struct ScheduleLog {
  absl::Time start;
  TimerCookie wakeup;
  TimerCookie to_self;
  TimerCookie to_other;
  std::vector<Received> fired;
};

// In Bootstrap schedules a wakeup and an event to itself and an event to `other`; records what it
// receives. Single-threaded use only (TestRuntime).
class Delayer : public Actor {
 public:
  Delayer(ActorId other, ScheduleLog* log) : Actor(&Delayer::StateWork), other_(other), log_(log) {}

 private:
  void Bootstrap() override {
    log_->start = Now();
    log_->wakeup = ScheduleWakeup(kWakeupDelay, 7);
    log_->to_self = Schedule(kSelfDelay, std::make_unique<EvValue>(1), 5);
    log_->to_other = Schedule(kOtherDelay, other_, std::make_unique<EvValue>(2), kNoFlags, 6);
  }

  TROUPE_STATE(StateWork) {
    Received r = Describe(*ev);
    r.at = Now();
    log_->fired.push_back(r);
  }

  ActorId other_;
  ScheduleLog* log_;
};

TEST(SchedulerTest, ActorScheduleFiresAtExactlyItsDelay) {
  TestRuntime runtime(SmallNode());
  const absl::Time start = runtime.Now();
  ScheduleLog log;
  const ActorId other = runtime.AllocateEdgeActor();
  const ActorId delayer = runtime.Register(std::make_unique<Delayer>(other, &log));
  // Bootstraps only: the clock stays put.
  EXPECT_EQ(runtime.DispatchEvents({.jump_timers = false}), DispatchResult::kIdle);
  EXPECT_EQ(log.start, start);
  EXPECT_EQ(runtime.PendingTimers(), 3u);
  EXPECT_TRUE(log.wakeup.IsPending());
  EXPECT_TRUE(log.to_self.IsPending());
  EXPECT_TRUE(log.to_other.IsPending());

  // One nanosecond before the first deadline nothing has fired; at the deadline the wakeup has.
  ASSERT_TRUE(runtime.AdvanceTime(kWakeupDelay - absl::Nanoseconds(1)));
  EXPECT_TRUE(log.fired.empty());
  EXPECT_TRUE(log.wakeup.IsPending());
  ASSERT_TRUE(runtime.AdvanceTime(absl::Nanoseconds(1)));
  ASSERT_EQ(log.fired.size(), 1u);
  EXPECT_EQ(log.fired[0].type, kEvWakeup);
  EXPECT_EQ(log.fired[0].value, 7u);
  EXPECT_EQ(log.fired[0].at, start + kWakeupDelay);
  EXPECT_FALSE(log.wakeup.IsPending());

  // Deadline order: the 60 ms event to the other actor comes next, before the 80 ms one to self.
  auto to_other = runtime.GrabEdgeEvent<EvValue>(other);
  ASSERT_TRUE(to_other);
  EXPECT_EQ(runtime.Now(), start + kOtherDelay);
  EXPECT_EQ(to_other->value, 2u);
  EXPECT_EQ(to_other.handle().cookie(), 6u);
  EXPECT_EQ(to_other.handle().sender(), delayer);
  EXPECT_EQ(log.fired.size(), 1u);

  EXPECT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  ASSERT_EQ(log.fired.size(), 2u);
  EXPECT_EQ(log.fired[1].type, kEvValue);
  EXPECT_EQ(log.fired[1].value, 1u);
  EXPECT_EQ(log.fired[1].cookie, 5u);
  EXPECT_EQ(log.fired[1].sender, delayer);
  EXPECT_EQ(log.fired[1].at, start + kSelfDelay);
  EXPECT_EQ(runtime.Now(), start + kSelfDelay);
  EXPECT_EQ(runtime.EdgeEventCount(other), 0u);

  // Fired timers are no longer pending and cannot be cancelled.
  EXPECT_EQ(runtime.PendingTimers(), 0u);
  EXPECT_FALSE(log.wakeup.IsPending());
  EXPECT_FALSE(log.to_self.IsPending());
  EXPECT_FALSE(log.to_other.IsPending());
  EXPECT_FALSE(log.wakeup.Cancel());
  EXPECT_FALSE(log.to_self.Cancel());
  EXPECT_FALSE(log.to_other.Cancel());
}

TEST(SchedulerTest, SystemScheduleFiresInDeadlineOrderAtExactlyItsDelay) {
  TestRuntime runtime(SmallNode());
  const absl::Time start = runtime.Now();
  const ActorId edge = runtime.AllocateEdgeActor();
  const int delays_ms[] = {80, 20, 60, 40, 0};
  constexpr size_t kTimers = std::size(delays_ms);
  std::vector<TimerCookie> cookies;
  for (size_t i = 0; i < kTimers; ++i) {
    auto handle = std::make_unique<EventHandle>(edge, ActorId(), std::make_unique<EvValue>(i),
                                                kNoFlags, static_cast<uint64_t>(delays_ms[i]));
    cookies.push_back(runtime.node().Schedule(absl::Milliseconds(delays_ms[i]), std::move(handle)));
  }
  EXPECT_EQ(runtime.PendingTimers(), kTimers);

  for (const int expected_ms : {0, 20, 40, 60, 80}) {
    auto got = runtime.GrabEdgeEvent<EvValue>(edge);
    ASSERT_TRUE(got) << "the " << expected_ms << " ms timer";
    ASSERT_LT(got->value, kTimers);
    EXPECT_EQ(delays_ms[got->value], expected_ms) << "fired out of deadline order";
    EXPECT_EQ(got.handle().cookie(), static_cast<uint64_t>(expected_ms));
    EXPECT_EQ(runtime.Now(), start + absl::Milliseconds(expected_ms));
    EXPECT_FALSE(cookies[got->value].IsPending());
  }
  EXPECT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(runtime.EdgeEventCount(edge), 0u);
  EXPECT_EQ(runtime.PendingTimers(), 0u);
  for (const TimerCookie& cookie : cookies) {
    EXPECT_FALSE(cookie.IsPending());
    EXPECT_FALSE(cookie.Cancel());
  }
}

// -- cancellation -------------------------------------------------------------------------------

TEST(SchedulerTest, CancelledTimerNeverFires) {
  TestRuntime runtime(SmallNode());
  const absl::Time start = runtime.Now();
  ActorSystem& system = runtime.node();
  const ActorId edge = runtime.AllocateEdgeActor();
  TimerCookie cancelled = system.Schedule(absl::Milliseconds(20), ValueTo(edge, 1));
  EXPECT_TRUE(cancelled.IsPending());
  EXPECT_TRUE(cancelled.Cancel()) << "a pending timer must be cancellable";
  EXPECT_FALSE(cancelled.IsPending());
  EXPECT_FALSE(cancelled.Cancel()) << "a second Cancel prevents nothing";
  // A copy shares the state.
  TimerCookie second = system.Schedule(absl::Milliseconds(30), ValueTo(edge, 2));
  const TimerCookie copy = second;
  EXPECT_TRUE(copy.Cancel());
  EXPECT_FALSE(second.IsPending());
  EXPECT_FALSE(second.Cancel());
  TimerCookie far = system.Schedule(absl::Hours(1), ValueTo(edge, 4));
  EXPECT_TRUE(far.Cancel());
  TimerCookie fence = system.Schedule(absl::Milliseconds(80), ValueTo(edge, 3));
  EXPECT_EQ(runtime.PendingTimers(), 1u) << "only the fence is still to fire";

  auto got = runtime.GrabEdgeEvent<EvValue>(edge);
  ASSERT_TRUE(got);
  EXPECT_EQ(got->value, 3u) << "a cancelled timer fired";
  EXPECT_EQ(runtime.Now(), start + absl::Milliseconds(80));
  EXPECT_FALSE(fence.Cancel()) << "Cancel after the event fired must return false";
  EXPECT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(runtime.EdgeEventCount(edge), 0u) << "a cancelled timer fired";
  EXPECT_EQ(runtime.Now(), start + absl::Milliseconds(80))
      << "the clock moved on to the cancelled hour-long timer";
  EXPECT_EQ(runtime.PendingTimers(), 0u);
}

// In Bootstrap schedules a wakeup, cancels it, and schedules a later one; records the wakeups it
// gets with the node's clock. Single-threaded use only (TestRuntime).
class Canceller : public Actor {
 public:
  Canceller(bool* cancel_result, std::vector<std::pair<uint64_t, absl::Time>>* wakeups)
      : Actor(&Canceller::StateWork), cancel_result_(cancel_result), wakeups_(wakeups) {}

 private:
  void Bootstrap() override {
    TimerCookie cookie = ScheduleWakeup(absl::Milliseconds(10), 1);
    *cancel_result_ = cookie.Cancel();
    ScheduleWakeup(absl::Milliseconds(60), 2);
  }
  TROUPE_STATE(StateWork) {
    if (ev->type() == kEvWakeup) {
      wakeups_->emplace_back(ev->Get<EvWakeup>()->tag, Now());
    }
  }

  bool* cancel_result_;
  std::vector<std::pair<uint64_t, absl::Time>>* wakeups_;
};

TEST(SchedulerTest, ActorCancelledWakeupNeverFires) {
  TestRuntime runtime(SmallNode());
  const absl::Time start = runtime.Now();
  bool cancel_result = false;
  std::vector<std::pair<uint64_t, absl::Time>> wakeups;
  runtime.Register(std::make_unique<Canceller>(&cancel_result, &wakeups));
  EXPECT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_TRUE(cancel_result);
  ASSERT_EQ(wakeups.size(), 1u) << "the cancelled wakeup fired";
  EXPECT_EQ(wakeups[0].first, 2u);
  EXPECT_EQ(wakeups[0].second, start + absl::Milliseconds(60));
}

TEST(SchedulerTest, CancelJustBeforeDeadlinePreventsDelivery) {
  TestRuntime runtime(SmallNode());
  const absl::Time start = runtime.Now();
  const ActorId edge = runtime.AllocateEdgeActor();
  TimerCookie cookie = runtime.node().Schedule(absl::Milliseconds(5), ValueTo(edge, 1));
  ASSERT_TRUE(runtime.AdvanceTime(absl::Milliseconds(5) - absl::Nanoseconds(1)));
  EXPECT_TRUE(cookie.IsPending());
  EXPECT_TRUE(cookie.Cancel());
  EXPECT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(runtime.EdgeEventCount(edge), 0u) << "a cancelled timer fired";
  EXPECT_EQ(runtime.Now(), start + absl::Milliseconds(5) - absl::Nanoseconds(1));
}

TEST(SchedulerTest, CancelAfterFireReturnsFalse) {
  TestRuntime runtime(SmallNode());
  const ActorId edge = runtime.AllocateEdgeActor();
  TimerCookie cookie = runtime.node().Schedule(absl::Milliseconds(5), ValueTo(edge, 1));
  ASSERT_TRUE(runtime.AdvanceTime(absl::Milliseconds(5)));
  EXPECT_EQ(runtime.EdgeEventCount(edge), 1u) << "not fired at its deadline";
  EXPECT_FALSE(cookie.IsPending());
  EXPECT_FALSE(cookie.Cancel());
  EXPECT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(runtime.EdgeEventCount(edge), 1u);
}

TEST(SchedulerTest, DefaultCookieRefersToNothing) {
  TimerCookie cookie;
  EXPECT_FALSE(cookie.IsPending());
  EXPECT_FALSE(cookie.Cancel());
  EXPECT_TRUE(cookie.TryFire());
}

// -- undelivered --------------------------------------------------------------------------------

using testutil::Mortal;

TEST(SchedulerTest, ScheduledEventToDeadActorIsReportedUndelivered) {
  TestRuntime runtime(SmallNode());
  const absl::Time start = runtime.Now();
  const ActorId probe = runtime.AllocateEdgeActor();
  const auto destroyed = std::make_shared<bool>(false);
  const ActorId victim = runtime.Register(std::make_unique<Mortal>(destroyed));
  // One to an actor that dies while the timer is pending, one to an id that never existed.
  runtime.node().Schedule(absl::Milliseconds(5), ValueTo(victim, 71, probe, kTrackDelivery));
  runtime.node().Schedule(absl::Milliseconds(7),
                          ValueTo(ActorId(0, 0, 1, 0x7FFFFFF0u), 72, probe, kTrackDelivery));
  runtime.Send(victim, std::make_unique<EvPoison>());
  EXPECT_EQ(runtime.DispatchEvents({.jump_timers = false}), DispatchResult::kIdle);
  ASSERT_TRUE(*destroyed);
  EXPECT_EQ(runtime.EdgeEventCount(probe), 0u);

  auto dead = runtime.GrabEdgeEvent<EvUndelivered>(probe);
  ASSERT_TRUE(dead);
  EXPECT_EQ(runtime.Now(), start + absl::Milliseconds(5)) << "reported when the timer fired";
  EXPECT_EQ(dead->reason, UndeliveredReason::kActorNotFound);
  EXPECT_EQ(dead->source_type, kEvValue);
  EXPECT_EQ(dead->cookie, 71u);
  auto never = runtime.GrabEdgeEvent<EvUndelivered>(probe);
  ASSERT_TRUE(never);
  EXPECT_EQ(runtime.Now(), start + absl::Milliseconds(7));
  EXPECT_EQ(never->reason, UndeliveredReason::kActorNotFound);
  EXPECT_EQ(never->source_type, kEvValue);
  EXPECT_EQ(never->cookie, 72u);
  EXPECT_EQ(runtime.DispatchEvents(), DispatchResult::kIdle);
  EXPECT_EQ(runtime.EdgeEventCount(probe), 0u);
}

// -- executor pools -------------------------------------------------------------------------------

// Keeps itself busy with self-sent kicks until `stop` is set, then notifies `quiet`.
class Spinner : public Actor {
 public:
  Spinner(const std::atomic<bool>* stop, std::atomic<int64_t>* spins, troupe::Notification* quiet)
      : Actor(&Spinner::StateWork), stop_(stop), spins_(spins), quiet_(quiet) {}

 private:
  void Bootstrap() override { Send(SelfId(), std::make_unique<testutil::EvKick>()); }
  TROUPE_STATE(StateWork) {
    if (ev->type() != testutil::kEvKick) {
      Unhandled(ev);
      return;
    }
    spins_->fetch_add(1, std::memory_order_relaxed);
    // acquire: pairs with the test's release store.
    if (stop_->load(std::memory_order_acquire)) {
      quiet_->Notify();
      return;
    }
    Send(SelfId(), std::make_unique<testutil::EvKick>());
  }

  const std::atomic<bool>* stop_;
  std::atomic<int64_t>* spins_;
  troupe::Notification* quiet_;
};

TEST(SchedulerTest, ActivationBudgetKeepsBusyActorFromStarvingItsPool) {
  // Before the system: the spinner uses them until the system has stopped, even when an
  // assertion below ends the test early.
  std::atomic<bool> stop{false};
  std::atomic<int64_t> spins{0};
  troupe::Notification quiet;
  auto system = MakeSystem();
  ASSERT_NE(system, nullptr);
  const absl::StatusOr<uint32_t> batch = system->PoolIndex("Batch");
  ASSERT_TRUE(batch.ok());
  ASSERT_EQ(system->config().pools(static_cast<int>(*batch)).threads(), 1u);
  RegisterOptions on_batch;
  on_batch.pool = *batch;

  ASSERT_TRUE(system->Register(std::make_unique<Spinner>(&stop, &spins, &quiet), on_batch));
  ASSERT_TRUE(WaitUntil([&] { return spins.load() > 1000; }));

  // The only worker of the pool is busy with the spinner; another actor must still be served.
  Inbox inbox;
  const ActorId other = system->Register(std::make_unique<Recorder>(&inbox), on_batch);
  ASSERT_TRUE(other);
  for (int i = 0; i < 10; ++i) {
    system->Send(other, std::make_unique<EvValue>(static_cast<uint64_t>(i)));
  }
  const bool served = inbox.WaitForType(kEvValue, 10);
  stop.store(true, std::memory_order_release);
  ASSERT_TRUE(quiet.WaitForNotificationWithTimeout(WaitTimeout()));
  EXPECT_TRUE(served) << "a self-sending actor starved its pool";
  const ActorSystemCounters counters = system->Counters();
  EXPECT_GT(counters.pools[*batch].budget_preemptions, 0u);
  EXPECT_GT(counters.pools[*batch].events, 1000u);
}

TEST(SchedulerTest, IdleWorkersPark) {
  auto system = MakeSystem();
  ASSERT_NE(system, nullptr);
  const ActorSystemCounters first = system->Counters();
  ASSERT_EQ(first.pools.size(), 4u);
  EXPECT_TRUE(WaitUntil([&] {
    const ActorSystemCounters counters = system->Counters();
    for (const PoolCounters& pool : counters.pools) {
      if (pool.parks < pool.threads) {
        return false;
      }
    }
    return true;
  })) << "idle workers must park (cost no CPU)";
  // A parked pool still wakes up for work.
  Inbox inbox;
  for (uint32_t pool = 0; pool < 4; ++pool) {
    RegisterOptions options;
    options.pool = pool;
    const ActorId id = system->Register(std::make_unique<Recorder>(&inbox), options);
    ASSERT_TRUE(id);
    EXPECT_EQ(id.pool(), pool);
    system->Send(id, std::make_unique<EvValue>(pool));
  }
  EXPECT_TRUE(inbox.WaitForType(kEvValue, 4));
}

}  // namespace
}  // namespace troupe
