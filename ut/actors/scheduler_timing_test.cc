// SPDX-License-Identifier: Apache-2.0
//
// The real scheduler thread (1 ms resolution), which TestRuntime replaces with its own timers:
// when a timer fires in real time, and what Cancel returns and prevents with the thread racing it.
// The simulated-time semantics are in scheduler_test.cc.
//
// Label `timing` (actors_timing_ut, Release only): the assertions are real-time windows. A timer
// must fire within a generous bound after its delay, and a 20 ms timer must still be pending when
// the test cancels it right after scheduling it.
#include <cstdint>
#include <iterator>
#include <memory>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/actor_id.h"
#include "actors/actor_system.h"
#include "actors/event.h"
#include "actors/timer.h"
#include "ut/actors/test_util.h"

namespace troupe {
namespace {

using testutil::EvValue;
using testutil::Inbox;
using testutil::kEvValue;
using testutil::MakeSystem;
using testutil::Received;
using testutil::Recorder;
using testutil::ValueTo;

// The real scheduler thread (1 ms resolution): a timer never fires before its delay, nor grossly
// after it, and timers to one recipient fire in deadline order. The upper bound is generous (a
// loaded 2-core machine, sanitizers): it catches a timer left behind until some later tick, not
// jitter.
TEST(SchedulerTest, RealSchedulerFiresNotBeforeDelayAndWithinBound) {
  const absl::Duration late_bound =
      testutil::kUnderSanitizer ? absl::Seconds(10) : absl::Seconds(2);
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
    EXPECT_LE(got[k].at - after[i], delay + late_bound)
        << "timer of " << delays_ms[i] << " ms fired " << (got[k].at - after[i]) << " after";
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

// The real scheduler thread: what Cancel returns and prevents, with the thread racing it.
TEST(SchedulerTest, RealSchedulerCancelledTimerNeverFires) {
  auto system = MakeSystem();
  ASSERT_NE(system, nullptr);
  Inbox inbox;
  const ActorId recorder = system->Register(std::make_unique<Recorder>(&inbox));
  TimerCookie cancelled = system->Schedule(absl::Milliseconds(20), ValueTo(recorder, 1));
  EXPECT_TRUE(cancelled.IsPending());
  EXPECT_TRUE(cancelled.Cancel()) << "a pending timer must be cancellable";
  EXPECT_FALSE(cancelled.IsPending());
  EXPECT_FALSE(cancelled.Cancel()) << "a second Cancel prevents nothing";
  // A copy shares the state.
  TimerCookie second = system->Schedule(absl::Milliseconds(30), ValueTo(recorder, 2));
  const TimerCookie copy = second;
  EXPECT_TRUE(copy.Cancel());
  EXPECT_FALSE(second.IsPending());
  EXPECT_FALSE(second.Cancel());
  // A cancelled timer far in the future stays counted until due.
  TimerCookie far = system->Schedule(absl::Hours(1), ValueTo(recorder, 4));
  EXPECT_TRUE(far.Cancel());
  // The fence is due after the short ones; timers fire in deadline order to the same recipient.
  TimerCookie fence = system->Schedule(absl::Milliseconds(80), ValueTo(recorder, 3));

  ASSERT_TRUE(inbox.WaitForType(kEvValue, 1));
  const std::vector<Received> got = inbox.OfType(kEvValue);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].value, 3u) << "a cancelled timer fired";
  EXPECT_FALSE(fence.Cancel()) << "Cancel after the event fired must return false";
  // Only the far cancelled timer is left: the short ones were dropped when due.
  EXPECT_EQ(system->Counters().pending_timers, 1u);
}

}  // namespace
}  // namespace troupe
