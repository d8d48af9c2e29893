// SPDX-License-Identifier: Apache-2.0
//
// OpenLoopSchedule (open_loop.h) on a clock the test keeps: the intended send times, the events
// due after a stall (all of them at once), an event kept due while the window is full, and the
// latency counted from the intended time. No real time passes.
#include "open_loop.h"

#include <cstdint>
#include <vector>

#include "gtest/gtest.h"

namespace troupe::examples {
namespace {

constexpr int64_t kStart = 1'000'000'000'000;  // any clock: the schedule reads none
constexpr int64_t kSecond = 1'000'000'000;

TEST(OpenLoopScheduleTest, IntendedTimesFollowTheRateWithoutDrift) {
  const OpenLoopSchedule schedule(kStart, 3, kStart + 10 * kSecond);
  EXPECT_EQ(schedule.IntendedNs(0), kStart);
  EXPECT_EQ(schedule.IntendedNs(1), kStart + 333'333'333);
  EXPECT_EQ(schedule.IntendedNs(2), kStart + 666'666'666);
  EXPECT_EQ(schedule.IntendedNs(3), kStart + kSecond);
  // Event 3k is due at exactly k seconds, however many came before.
  EXPECT_EQ(schedule.IntendedNs(29), kStart + 9 * kSecond + 666'666'666);
}

TEST(OpenLoopScheduleTest, HoldsRateTimesSecondsEvents) {
  EXPECT_EQ(OpenLoopSchedule(kStart, 10'000, kStart + 5 * kSecond).total(), 50'000u);
  EXPECT_EQ(OpenLoopSchedule(kStart, 3, kStart + 2 * kSecond).total(), 6u);
  // A part of a second: the events intended before the end (0, 1/3 s, 2/3 s in 0.7 s).
  EXPECT_EQ(OpenLoopSchedule(kStart, 3, kStart + 700'000'000).total(), 3u);
  EXPECT_EQ(OpenLoopSchedule(kStart, 1'000'000'000, kStart + 3600 * kSecond).total(),
            3'600'000'000'000u);
}

TEST(OpenLoopScheduleTest, EventsBecomeDueAtTheirIntendedTime) {
  OpenLoopSchedule schedule(kStart, 1000, kStart + kSecond);
  EXPECT_EQ(schedule.Due(kStart - 1), 0u);
  EXPECT_EQ(schedule.Due(kStart), 1u);  // event 0 at the start
  EXPECT_EQ(schedule.Take(), 0u);
  EXPECT_EQ(schedule.Due(kStart + 999'999), 0u);
  EXPECT_EQ(schedule.UntilNextNs(kStart + 999'999), 1);
  EXPECT_EQ(schedule.Due(kStart + 1'000'000), 1u);
  EXPECT_EQ(schedule.UntilNextNs(kStart + 1'000'000), 0);
}

TEST(OpenLoopScheduleTest, CatchesUpEveryEventAfterAStall) {
  OpenLoopSchedule schedule(kStart, 1000, kStart + kSecond);
  schedule.Take();
  // The sender stalled 250 ms: events 1..250 are all due now, none skipped.
  const int64_t now = kStart + 250'000'000;
  ASSERT_EQ(schedule.Due(now), 250u);
  std::vector<uint64_t> sent;
  while (schedule.Due(now) > 0) {
    sent.push_back(schedule.Take());
  }
  ASSERT_EQ(sent.size(), 250u);
  EXPECT_EQ(sent.front(), 1u);
  EXPECT_EQ(sent.back(), 250u);
  // Each one's latency counts from its own intended time: the stall shows in all of them.
  const int64_t answered = now + 100'000;  // a 100 us round trip once sent
  EXPECT_EQ(schedule.LatencyNs(1, answered), 249'000'000u + 100'000u);
  EXPECT_EQ(schedule.LatencyNs(250, answered), 100'000u);
}

TEST(OpenLoopScheduleTest, AnEventThatFindsTheWindowFullStaysDue) {
  OpenLoopSchedule schedule(kStart, 1000, kStart + kSecond);
  const uint64_t window = 4;
  uint64_t outstanding = 0;
  // 10 ms in, 11 events are due but the window takes 4; the rest wait.
  int64_t now = kStart + 10'000'000;
  while (outstanding < window && schedule.Due(now) > 0) {
    schedule.Take();
    ++outstanding;
  }
  EXPECT_EQ(schedule.taken(), 4u);
  EXPECT_EQ(schedule.Due(now), 7u);
  // 5 ms later one acknowledgement frees a slot: event 4 goes out, late by 11 ms, and its
  // latency keeps growing from its intended time (4 ms), not from now.
  now += 5'000'000;
  --outstanding;
  ASSERT_GT(schedule.Due(now), 0u);
  const uint64_t next = schedule.Take();
  EXPECT_EQ(next, 4u);
  EXPECT_EQ(schedule.IntendedNs(next), kStart + 4'000'000);
  EXPECT_EQ(schedule.LatencyNs(next, now + 1'000'000), 12'000'000u);
  EXPECT_EQ(schedule.Due(now), 11u);  // 16 due by 15 ms, 5 taken
}

TEST(OpenLoopScheduleTest, FinishesAfterTheLastEventAndCountsWhatIsLeft) {
  OpenLoopSchedule schedule(kStart, 2, kStart + kSecond);
  ASSERT_EQ(schedule.total(), 2u);
  // Long after the end only the schedule's events are due: nothing is invented.
  EXPECT_EQ(schedule.Due(kStart + 60 * kSecond), 2u);
  schedule.Take();
  EXPECT_FALSE(schedule.finished());
  EXPECT_EQ(schedule.total() - schedule.taken(), 1u);  // what the sender reports unsent
  schedule.Take();
  EXPECT_TRUE(schedule.finished());
  EXPECT_EQ(schedule.Due(kStart + 60 * kSecond), 0u);
  EXPECT_EQ(schedule.UntilNextNs(kStart), -1);
}

TEST(OpenLoopScheduleTest, AnAnswerBeforeTheIntendedTimeIsNoNegativeLatency) {
  const OpenLoopSchedule schedule(kStart, 10, kStart + kSecond);
  EXPECT_EQ(schedule.LatencyNs(5, kStart), 0u);
  EXPECT_EQ(schedule.LatencyNs(5, kStart + 500'000'000), 0u);
  EXPECT_EQ(schedule.LatencyNs(5, kStart + 500'000'001), 1u);
}

}  // namespace
}  // namespace troupe::examples
