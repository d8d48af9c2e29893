// SPDX-License-Identifier: Apache-2.0
//
// Delayed sends (Actor::Schedule, Actor::ScheduleWakeup, ActorSystem::Schedule) and TimerCookie
// cancellation; executor pool budgets and parking.
#include <atomic>
#include <cstdint>
#include <iterator>
#include <memory>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/actor.h"
#include "actors/actor_system.h"
#include "actors/event.h"
#include "actors/events.h"
#include "actors/sync.h"
#include "actors/timer.h"
#include "ut/actors/test_util.h"

namespace troupe {
namespace {

using testutil::Describe;
using testutil::EvValue;
using testutil::Inbox;
using testutil::kEvValue;
using testutil::MakeSystem;
using testutil::Received;
using testutil::Recorder;
using testutil::WaitTimeout;
using testutil::WaitUntil;

constexpr absl::Duration kWakeupDelay = absl::Milliseconds(40);
constexpr absl::Duration kOtherDelay = absl::Milliseconds(60);
constexpr absl::Duration kSelfDelay = absl::Milliseconds(80);

// What a Delayer scheduled, published before `scheduled` is notified.
struct ScheduleLog {
  absl::Time start;
  TimerCookie wakeup;
  TimerCookie to_self;
  TimerCookie to_other;
  troupe::Notification scheduled;
};

// In Bootstrap schedules a wakeup and an event to itself and an event to `other`; records what it
// receives.
class Delayer : public Actor {
 public:
  Delayer(Inbox* inbox, ActorId other, ScheduleLog* log)
      : Actor(&Delayer::StateWork), inbox_(inbox), other_(other), log_(log) {}

 private:
  void Bootstrap() override {
    log_->start = absl::Now();
    log_->wakeup = ScheduleWakeup(kWakeupDelay, 7);
    log_->to_self = Schedule(kSelfDelay, std::make_unique<EvValue>(1), 5);
    log_->to_other = Schedule(kOtherDelay, other_, std::make_unique<EvValue>(2), kNoFlags, 6);
    log_->scheduled.Notify();
  }

  TROUPE_STATE(StateWork) { inbox_->Add(Describe(*ev)); }

  Inbox* inbox_;
  ActorId other_;
  ScheduleLog* log_;
};

TEST(SchedulerTest, ActorScheduleFiresNotBeforeDelay) {
  auto system = MakeSystem();
  ASSERT_NE(system, nullptr);
  Inbox own_inbox;
  Inbox other_inbox;
  ScheduleLog log;
  const ActorId other = system->Register(std::make_unique<Recorder>(&other_inbox));
  const ActorId delayer = system->Register(std::make_unique<Delayer>(&own_inbox, other, &log));
  ASSERT_TRUE(log.scheduled.WaitForNotificationWithTimeout(WaitTimeout()));

  ASSERT_TRUE(
      own_inbox.WaitFor([](const std::vector<Received>& events) { return events.size() >= 2; }));
  ASSERT_TRUE(other_inbox.WaitForType(kEvValue));
  const std::vector<Received> own = own_inbox.Snapshot();
  ASSERT_EQ(own.size(), 2u);
  // Deadline order: the 40 ms wakeup first, then the 80 ms event.
  EXPECT_EQ(own[0].type, kEvWakeup);
  EXPECT_EQ(own[0].value, 7u);
  EXPECT_GE(own[0].at - log.start, kWakeupDelay);
  EXPECT_EQ(own[1].type, kEvValue);
  EXPECT_EQ(own[1].value, 1u);
  EXPECT_EQ(own[1].cookie, 5u);
  EXPECT_EQ(own[1].sender, delayer);
  EXPECT_GE(own[1].at - log.start, kSelfDelay);

  const Received to_other = other_inbox.OfType(kEvValue).front();
  EXPECT_EQ(to_other.value, 2u);
  EXPECT_EQ(to_other.cookie, 6u);
  EXPECT_EQ(to_other.sender, delayer);
  EXPECT_GE(to_other.at - log.start, kOtherDelay);

  // Fired timers are no longer pending and cannot be cancelled.
  EXPECT_FALSE(log.wakeup.IsPending());
  EXPECT_FALSE(log.to_self.IsPending());
  EXPECT_FALSE(log.to_other.IsPending());
  EXPECT_FALSE(log.wakeup.Cancel());
  EXPECT_FALSE(log.to_self.Cancel());
  EXPECT_FALSE(log.to_other.Cancel());
}

TEST(SchedulerTest, SystemScheduleFiresInDeadlineOrderNotBeforeDelay) {
  auto system = MakeSystem();
  ASSERT_NE(system, nullptr);
  Inbox inbox;
  const ActorId recorder = system->Register(std::make_unique<Recorder>(&inbox));
  const int delays_ms[] = {80, 20, 60, 40, 0};
  constexpr size_t kTimers = std::size(delays_ms);
  // The scheduler takes its deadline inside Schedule: between `before` and `after` plus the delay.
  std::vector<absl::Time> before(kTimers);
  std::vector<absl::Time> after(kTimers);
  std::vector<TimerCookie> cookies;
  for (size_t i = 0; i < kTimers; ++i) {
    before[i] = absl::Now();
    cookies.push_back(system->Schedule(
        absl::Milliseconds(delays_ms[i]),
        std::make_unique<EventHandle>(recorder, ActorId(), std::make_unique<EvValue>(i), kNoFlags,
                                      static_cast<uint64_t>(delays_ms[i]))));
    after[i] = absl::Now();
  }
  ASSERT_TRUE(inbox.WaitForType(kEvValue, kTimers));
  const std::vector<Received> got = inbox.OfType(kEvValue);
  ASSERT_EQ(got.size(), kTimers);
  for (size_t k = 0; k < got.size(); ++k) {
    const size_t i = got[k].value;
    ASSERT_LT(i, kTimers);
    const absl::Duration delay = absl::Milliseconds(delays_ms[i]);
    EXPECT_EQ(got[k].cookie, static_cast<uint64_t>(delays_ms[i]));
    EXPECT_GE(got[k].at - before[i], delay) << "timer of " << delays_ms[i] << " ms fired early";
    if (k > 0) {
      // Same sender, same recipient: arrival order is firing order, which is deadline order.
      const size_t prev = got[k - 1].value;
      EXPECT_LE(before[prev] + absl::Milliseconds(delays_ms[prev]), after[i] + delay)
          << delays_ms[prev] << " ms timer fired after the " << delays_ms[i] << " ms one";
    }
  }
  for (const TimerCookie& cookie : cookies) {
    EXPECT_FALSE(cookie.IsPending());
    EXPECT_FALSE(cookie.Cancel());
  }
}

// In Bootstrap schedules a wakeup, cancels it, and schedules a later fence wakeup.
class Canceller : public Actor {
 public:
  Canceller(Inbox* inbox, bool* cancel_result, troupe::Notification* scheduled)
      : Actor(&Canceller::StateWork),
        inbox_(inbox),
        cancel_result_(cancel_result),
        scheduled_(scheduled) {}

 private:
  void Bootstrap() override {
    TimerCookie cookie = ScheduleWakeup(absl::Milliseconds(10), 1);
    *cancel_result_ = cookie.Cancel();
    ScheduleWakeup(absl::Milliseconds(60), 2);
    scheduled_->Notify();
  }
  TROUPE_STATE(StateWork) { inbox_->Add(Describe(*ev)); }

  Inbox* inbox_;
  bool* cancel_result_;
  troupe::Notification* scheduled_;
};

TEST(SchedulerTest, CancelledTimerNeverFires) {
  auto system = MakeSystem();
  ASSERT_NE(system, nullptr);
  Inbox inbox;
  const ActorId recorder = system->Register(std::make_unique<Recorder>(&inbox));
  auto handle = [&](uint64_t value) {
    return std::make_unique<EventHandle>(recorder, ActorId(), std::make_unique<EvValue>(value),
                                         kNoFlags, value);
  };
  TimerCookie cancelled = system->Schedule(absl::Milliseconds(20), handle(1));
  EXPECT_TRUE(cancelled.IsPending());
  EXPECT_TRUE(cancelled.Cancel()) << "a pending timer must be cancellable";
  EXPECT_FALSE(cancelled.IsPending());
  EXPECT_FALSE(cancelled.Cancel()) << "a second Cancel prevents nothing";
  // A copy shares the state.
  TimerCookie second = system->Schedule(absl::Milliseconds(30), handle(2));
  const TimerCookie copy = second;
  EXPECT_TRUE(copy.Cancel());
  EXPECT_FALSE(second.IsPending());
  EXPECT_FALSE(second.Cancel());
  // A cancelled timer far in the future stays counted until due.
  TimerCookie far = system->Schedule(absl::Hours(1), handle(4));
  EXPECT_TRUE(far.Cancel());
  // The fence is due after the short ones; timers fire in deadline order to the same recipient.
  TimerCookie fence = system->Schedule(absl::Milliseconds(80), handle(3));

  ASSERT_TRUE(inbox.WaitForType(kEvValue, 1));
  const std::vector<Received> got = inbox.OfType(kEvValue);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].value, 3u) << "a cancelled timer fired";
  EXPECT_FALSE(fence.Cancel()) << "Cancel after the event fired must return false";
  // Only the far cancelled timer is left: the short ones were dropped when due.
  EXPECT_EQ(system->Counters().pending_timers, 1u);

  // The same from inside an actor.
  Inbox actor_inbox;
  bool cancel_result = false;
  troupe::Notification scheduled;
  system->Register(std::make_unique<Canceller>(&actor_inbox, &cancel_result, &scheduled));
  ASSERT_TRUE(scheduled.WaitForNotificationWithTimeout(WaitTimeout()));
  EXPECT_TRUE(cancel_result);
  ASSERT_TRUE(actor_inbox.WaitForType(kEvWakeup, 1));
  const std::vector<Received> wakeups = actor_inbox.OfType(kEvWakeup);
  ASSERT_EQ(wakeups.size(), 1u);
  EXPECT_EQ(wakeups[0].value, 2u) << "the cancelled wakeup fired";
}

TEST(SchedulerTest, CancelAfterFireReturnsFalse) {
  auto system = MakeSystem();
  ASSERT_NE(system, nullptr);
  Inbox inbox;
  const ActorId recorder = system->Register(std::make_unique<Recorder>(&inbox));
  TimerCookie cookie = system->Schedule(
      absl::Milliseconds(5),
      std::make_unique<EventHandle>(recorder, ActorId(), std::make_unique<EvValue>(1)));
  ASSERT_TRUE(inbox.WaitForType(kEvValue, 1));
  EXPECT_FALSE(cookie.IsPending());
  EXPECT_FALSE(cookie.Cancel());
  EXPECT_EQ(inbox.OfType(kEvValue).size(), 1u);
}

TEST(SchedulerTest, DefaultCookieRefersToNothing) {
  TimerCookie cookie;
  EXPECT_FALSE(cookie.IsPending());
  EXPECT_FALSE(cookie.Cancel());
  EXPECT_TRUE(cookie.TryFire());
}

TEST(SchedulerTest, ScheduledEventToDeadActorIsReportedUndelivered) {
  auto system = MakeSystem();
  ASSERT_NE(system, nullptr);
  Inbox probe_inbox;
  const ActorId probe = system->Register(std::make_unique<Recorder>(&probe_inbox));
  system->Schedule(absl::Milliseconds(5),
                   std::make_unique<EventHandle>(ActorId(0, 0, 1, 0x7FFFFFF0u), probe,
                                                 std::make_unique<EvValue>(1), kTrackDelivery, 71));
  ASSERT_TRUE(probe_inbox.WaitForType(kEvUndelivered));
  const Received r = probe_inbox.OfType(kEvUndelivered).front();
  EXPECT_EQ(r.reason, UndeliveredReason::kActorNotFound);
  EXPECT_EQ(r.source_type, kEvValue);
  EXPECT_EQ(r.undelivered_cookie, 71u);
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
  auto system = MakeSystem();
  ASSERT_NE(system, nullptr);
  const absl::StatusOr<uint32_t> batch = system->PoolIndex("Batch");
  ASSERT_TRUE(batch.ok());
  ASSERT_EQ(system->config().pools(static_cast<int>(*batch)).threads(), 1u);
  RegisterOptions on_batch;
  on_batch.pool = *batch;

  std::atomic<bool> stop{false};
  std::atomic<int64_t> spins{0};
  troupe::Notification quiet;
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
