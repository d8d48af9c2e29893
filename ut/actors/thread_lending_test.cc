// SPDX-License-Identifier: Apache-2.0
//
// The thread-lending rule (actors/internal/thread_lending.h) on recorded counter series: which pool
// takes a thread from where, when it is given back, and the bounds no series can break. Pure
// function of the samples, so every case is deterministic.
#include "actors/internal/thread_lending.h"

#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace troupe::internal {
namespace {

// Busy and idle samples of a pool with `threads` threads.
LendingSample Saturated(uint32_t threads, int64_t queue = 8) {
  return {static_cast<double>(threads), queue};
}
LendingSample Idle() { return {0.0, 0}; }

// User (1..3, priority 1) and Batch (1..3, priority 0), 2 threads each, budget 4 (no room).
ThreadLending UserAndBatch(uint32_t budget = 4) {
  return ThreadLending({{"User", 2, 1, 3, 1}, {"Batch", 2, 1, 3, 0}}, budget);
}

std::vector<uint32_t> Counts(const ThreadLending& lending) { return lending.threads(); }

TEST(ThreadLendingTest, PoolsThatKeepTheirCountTurnLendingOff) {
  ThreadLending lending({{"User", 2, 2, 2, 0}, {"Batch", 1, 1, 1, 0}}, 8);
  EXPECT_FALSE(lending.enabled());
  EXPECT_TRUE(lending.Decide({Saturated(2), Idle()}).empty());
  EXPECT_EQ(Counts(lending), (std::vector<uint32_t>{2, 1}));
}

TEST(ThreadLendingTest, ABackedUpPoolTakesAThreadAnIdlePoolDoesNotUse) {
  ThreadLending lending = UserAndBatch();
  const std::vector<LendingMove> moves = lending.Decide({Saturated(2), Idle()});
  ASSERT_EQ(moves.size(), 1u);
  EXPECT_EQ(moves[0].from, 1);
  EXPECT_EQ(moves[0].to, 0);
  EXPECT_NE(moves[0].reason.find("User: busy 2.00 of 2 threads, queue 8"), std::string::npos)
      << moves[0].reason;
  EXPECT_NE(moves[0].reason.find("Batch: busy 0.00 of 2"), std::string::npos) << moves[0].reason;
  EXPECT_EQ(Counts(lending), (std::vector<uint32_t>{3, 1}));
  // At its maximum and at the lender's minimum: nothing more moves.
  EXPECT_TRUE(lending.Decide({Saturated(3), Idle()}).empty());
  EXPECT_EQ(Counts(lending), (std::vector<uint32_t>{3, 1}));
}

TEST(ThreadLendingTest, ABorrowedThreadGoesBackWhenTheLoadDropsAndTheLenderGetsItBack) {
  ThreadLending lending = UserAndBatch();
  lending.Decide({Saturated(2), Idle()});
  ASSERT_EQ(Counts(lending), (std::vector<uint32_t>{3, 1}));
  // Still busy: kept.
  EXPECT_TRUE(lending.Decide({{2.95, 3}, Idle()}).empty());
  // Idle: User gives one back and Batch takes its own back in the same period.
  const std::vector<LendingMove> moves = lending.Decide({{1.0, 0}, Idle()});
  ASSERT_EQ(moves.size(), 2u);
  EXPECT_EQ(moves[0].from, 0);
  EXPECT_EQ(moves[0].to, LendingMove::kBudget);
  EXPECT_EQ(moves[1].from, LendingMove::kBudget);
  EXPECT_EQ(moves[1].to, 1);
  EXPECT_EQ(Counts(lending), (std::vector<uint32_t>{2, 2}));
}

TEST(ThreadLendingTest, BusyThreadsWithAnEmptyQueueOrAQueueWithIdleThreadsTakeNothing) {
  ThreadLending lending = UserAndBatch();
  EXPECT_TRUE(lending.Decide({{2.0, 0}, Idle()}).empty());  // busy, nothing waits
  EXPECT_TRUE(lending.Decide({{1.0, 5}, Idle()}).empty());  // a queue its idle thread will run
  EXPECT_EQ(Counts(lending), (std::vector<uint32_t>{2, 2}));
}

TEST(ThreadLendingTest, TheBudgetsRoomGoesFirstAndComesBack) {
  // Budget 6 over 4 configured threads: 2 threads of room.
  ThreadLending lending = UserAndBatch(6);
  EXPECT_EQ(lending.bound(), 6u);
  std::vector<LendingMove> moves = lending.Decide({Saturated(2), Saturated(2)});
  ASSERT_EQ(moves.size(), 2u);
  EXPECT_EQ(moves[0].from, LendingMove::kBudget);
  EXPECT_EQ(moves[0].to, 0);  // User first: higher priority
  EXPECT_EQ(moves[1].from, LendingMove::kBudget);
  EXPECT_EQ(moves[1].to, 1);
  EXPECT_EQ(Counts(lending), (std::vector<uint32_t>{3, 3}));
  // No room left and both at their maximum.
  EXPECT_TRUE(lending.Decide({Saturated(3), Saturated(3)}).empty());
  // The load drops: each gives one back, one period at a time.
  lending.Decide({Idle(), Idle()});
  EXPECT_EQ(Counts(lending), (std::vector<uint32_t>{2, 2}));
  EXPECT_TRUE(lending.Decide({Idle(), Idle()}).empty());
}

TEST(ThreadLendingTest, HigherPriorityTakesFromABusyLowerPriorityPoolNotTheOtherWayRound) {
  ThreadLending lending = UserAndBatch();
  // Both backed up: User (priority 1) takes one of Batch's busy threads.
  std::vector<LendingMove> moves = lending.Decide({Saturated(2), Saturated(2)});
  ASSERT_EQ(moves.size(), 1u);
  EXPECT_EQ(moves[0].from, 1);
  EXPECT_EQ(moves[0].to, 0);
  EXPECT_NE(moves[0].reason.find("lower-priority"), std::string::npos) << moves[0].reason;
  EXPECT_EQ(Counts(lending), (std::vector<uint32_t>{3, 1}));
  // Batch backs up alone while User is busy too: it cannot take from the higher priority.
  EXPECT_TRUE(lending.Decide({{3.0, 0}, Saturated(1)}).empty());
  // Once User idles a thread, Batch takes it back.
  moves = lending.Decide({{1.5, 0}, Saturated(1)});
  ASSERT_FALSE(moves.empty());
  EXPECT_EQ(Counts(lending), (std::vector<uint32_t>{2, 2}));
}

TEST(ThreadLendingTest, EqualPrioritiesTakeOnlyIdleThreads) {
  ThreadLending lending({{"A", 2, 1, 3, 0}, {"B", 2, 1, 3, 0}}, 4);
  EXPECT_TRUE(lending.Decide({Saturated(2), Saturated(2)}).empty());
  EXPECT_EQ(Counts(lending), (std::vector<uint32_t>{2, 2}));
}

TEST(ThreadLendingTest, TheLenderIsTheLeastImportantThenTheMostIdle) {
  ThreadLending lending(
      {{"User", 2, 1, 4, 2}, {"Low", 2, 1, 2, 0}, {"Lower", 2, 1, 2, 0}, {"High", 2, 1, 2, 5}}, 8);
  // Every other pool has an idle thread; Low and Lower share the lowest priority, Lower idles more.
  const std::vector<LendingMove> moves = lending.Decide({Saturated(2), {0.8, 0}, {0.1, 0}, Idle()});
  ASSERT_EQ(moves.size(), 1u);
  EXPECT_EQ(moves[0].from, 2);
  EXPECT_EQ(moves[0].to, 0);
}

TEST(ThreadLendingTest, APoolThatLentItsLastThreadGetsOneBackFromAnyPoolWhenWorkComes) {
  ThreadLending lending({{"User", 1, 1, 2, 1}, {"Batch", 1, 0, 1, 0}}, 2);
  lending.Decide({Saturated(1), Idle()});
  ASSERT_EQ(Counts(lending), (std::vector<uint32_t>{2, 0}));
  // Batch's queue fills while User, of higher priority, is saturated: Batch still gets one.
  const std::vector<LendingMove> moves = lending.Decide({Saturated(2), {0.0, 1}});
  ASSERT_EQ(moves.size(), 1u);
  EXPECT_EQ(moves[0].from, 0);
  EXPECT_EQ(moves[0].to, 1);
  EXPECT_NE(moves[0].reason.find("from busy User"), std::string::npos) << moves[0].reason;
  EXPECT_EQ(Counts(lending), (std::vector<uint32_t>{1, 1}));
}

TEST(ThreadLendingTest, FollowsABusyPoolThatAlternatesEveryTenPeriods) {
  // A recorded series: the busy pool alternates every 10 periods (100 ms at the default period).
  // Two pools of 2 threads (1..3) on a budget of 4: the busy one should run 3.
  ThreadLending lending({{"User", 2, 1, 3, 0}, {"Batch", 2, 1, 3, 0}}, 4);
  std::vector<uint32_t> periods_to_follow;
  for (int phase = 0; phase < 6; ++phase) {
    const size_t busy = static_cast<size_t>(phase % 2);
    int followed = -1;
    for (int period = 0; period < 10; ++period) {
      std::vector<LendingSample> samples(2);
      samples[busy] = Saturated(lending.threads()[busy]);
      samples[1 - busy] = Idle();
      lending.Decide(samples);
      if (followed < 0 && lending.threads()[busy] == 3) {
        followed = period + 1;
      }
    }
    ASSERT_GT(followed, 0) << "phase " << phase;
    periods_to_follow.push_back(static_cast<uint32_t>(followed));
  }
  // The first phase takes the idle pool's thread in one period. Later ones take two: in the first,
  // the last phase's pool gives back what it borrowed and the busy one regains its own; in the
  // second, it borrows.
  EXPECT_EQ(periods_to_follow, (std::vector<uint32_t>{1, 2, 2, 2, 2, 2}));
}

TEST(ThreadLendingTest, NoSeriesBreaksTheBoundsOrMovesAPoolTwiceInAPeriod) {
  const std::vector<LendingLimits> pools = {
      {"System", 1, 1, 1, 3}, {"User", 2, 1, 4, 1}, {"Batch", 1, 1, 3, 0}, {"IC", 1, 1, 2, 2}};
  ThreadLending lending(pools, 6);
  uint64_t state = 0x2545F4914F6CDD1DULL;
  const auto next = [&state] {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  for (int period = 0; period < 20'000; ++period) {
    std::vector<LendingSample> samples;
    for (size_t p = 0; p < pools.size(); ++p) {
      const uint32_t threads = lending.threads()[p];
      samples.push_back({static_cast<double>(next() % (100 * threads + 1)) / 100.0,
                         static_cast<int64_t>(next() % 3)});
    }
    const std::vector<uint32_t> before = lending.threads();
    const std::vector<LendingMove> moves = lending.Decide(samples);
    std::vector<int> changes(pools.size(), 0);
    for (const LendingMove& move : moves) {
      for (const int p : {move.from, move.to}) {
        if (p != LendingMove::kBudget) {
          ++changes[static_cast<size_t>(p)];
        }
      }
    }
    for (size_t p = 0; p < pools.size(); ++p) {
      ASSERT_LE(changes[p], 1) << "period " << period << " pool " << pools[p].name;
      ASSERT_GE(lending.threads()[p], pools[p].min_threads) << "period " << period;
      ASSERT_LE(lending.threads()[p], pools[p].max_threads) << "period " << period;
      const int64_t delta = int64_t{lending.threads()[p]} - int64_t{before[p]};
      ASSERT_LE(delta * delta, 1) << "period " << period;
    }
    const uint32_t total = std::accumulate(lending.threads().begin(), lending.threads().end(), 0U);
    ASSERT_LE(total, lending.bound()) << "period " << period;
  }
}

}  // namespace
}  // namespace troupe::internal
