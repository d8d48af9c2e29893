// SPDX-License-Identifier: Apache-2.0
//
// Threads moving between pools on real workers: counts changed by hand while actors run (no event
// lost, per-pair order kept), a node stopped while threads are lent, a saturated pool borrowing an
// idle pool's thread and giving it back (each move logged with its figures), a pool that lent its
// last thread still running what it is sent, a worker that rests handing the pool's I/O loop to a
// running one, and the temporary thread of a pool whose workers are all inside long handlers. The
// rule itself is tested on recorded series in thread_lending_test.cc.
// Every wait is bounded (WaitTimeout); the loads end on a flag or a count.
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/actor.h"
#include "actors/actor_system.h"
#include "actors/internal/executor_pool.h"
#include "actors/internal/runtime.h"
#include "actors/log.h"
#include "actors/node_hooks.h"
#include "actors/sync.h"
#include "ut/actors/fake_poller.h"
#include "ut/actors/scheduling_util.h"
#include "ut/actors/test_util.h"

namespace troupe {
namespace {

using testutil::AddPool;
using testutil::BusyFor;
using testutil::DescribeCounters;
using testutil::EvKick;
using testutil::EvValue;
using testutil::FakePoller;
using testutil::LineWithAll;
using testutil::MakeNodeWithPool;
using testutil::OnPool;
using testutil::Pair;
using testutil::RegisterPair;
using testutil::Scaled;
using testutil::Serve;
using testutil::WaitTimeout;
using testutil::WaitUntil;

// Returns pool `pool`'s counters.
PoolCounters CountersOf(const ActorSystem& system, uint32_t pool) {
  return system.Counters().pools.at(pool);
}

// A pool that may move between 1 and `max` threads, starting at `threads`.
proto::PoolConfig* AddLendingPool(proto::ActorSystemConfig* config, const std::string& name,
                                  uint32_t threads, uint32_t max, uint32_t priority = 0) {
  proto::PoolConfig* pool = AddPool(config, name, threads);
  pool->set_min_threads(1);
  pool->set_max_threads(max);
  pool->set_priority(priority);
  return pool;
}

// Handles each EvKick for `work` (spinning, so it occupies its worker) and kicks itself again
// until `stop` is set.
class SelfKicker : public Actor {
 public:
  SelfKicker(absl::Duration work, const std::atomic<bool>* stop)
      : Actor(&SelfKicker::StateWork), work_(work), stop_(stop) {}

 private:
  TROUPE_STATE(StateWork) {
    if (ev->type() != testutil::kEvKick) {
      Unhandled(ev);
      return;
    }
    BusyFor(work_);
    // relaxed: the flag only ends the load; a late look costs one more round.
    if (!stop_->load(std::memory_order_relaxed)) {
      Send(SelfId(), std::make_unique<EvKick>());
    }
  }

  const absl::Duration work_;
  const std::atomic<bool>* stop_;
};

// Starts `count` SelfKickers on `pool`, each handling events of `work` until `stop`.
void StartKickers(ActorSystem& system, uint32_t pool, int count, absl::Duration work,
                  const std::atomic<bool>* stop) {
  for (int i = 0; i < count; ++i) {
    const ActorId kicker = system.Register(std::make_unique<SelfKicker>(work, stop), OnPool(pool));
    system.Send(kicker, std::make_unique<EvKick>());
  }
}

// Blocks its worker on the first EvKick until `release` is notified (bounded by WaitTimeout).
class HandlerBlocker : public Actor {
 public:
  HandlerBlocker(troupe::Notification* entered, troupe::Notification* release)
      : Actor(&HandlerBlocker::StateWork), entered_(entered), release_(release) {}

 private:
  TROUPE_STATE(StateWork) {
    if (ev->type() != testutil::kEvKick) {
      Unhandled(ev);
      return;
    }
    entered_->Notify();
    release_->WaitForNotificationWithTimeout(WaitTimeout());
  }

  troupe::Notification* entered_;
  troupe::Notification* release_;
};

// Notifies `handled` on its first EvValue.
class FirstAnswer : public Actor {
 public:
  explicit FirstAnswer(troupe::Notification* handled)
      : Actor(&FirstAnswer::StateWork), handled_(handled) {}

 private:
  TROUPE_STATE(StateWork) {
    if (ev->type() == testutil::kEvValue && !handled_->HasBeenNotified()) {
      handled_->Notify();
    }
  }

  troupe::Notification* handled_;
};

TEST(PoolLendingTest, ThreadsMovedWhileGamesRunLoseNoEventAndKeepEachPairsOrder) {
  proto::ActorSystemConfig config;
  AddLendingPool(&config, "User", 2, 4);
  // The rule itself stays out of it: a period far longer than the test.
  config.mutable_lending()->set_period_ms(10'000);
  uint32_t user = 0;
  std::unique_ptr<ActorSystem> system = MakeNodeWithPool(config, "User", &user);
  ASSERT_NE(system, nullptr);
  internal::ExecutorPool& pool = internal::RuntimeOf(*system)->pool(user);
  const auto pairs = static_cast<size_t>(Scaled(16, 4));
  const uint64_t round_trips = static_cast<uint64_t>(Scaled(20'000, 2'000));
  std::vector<std::unique_ptr<Pair>> games;
  for (size_t i = 0; i < pairs; ++i) {
    games.push_back(std::make_unique<Pair>());
    RegisterPair(*system, user, round_trips, games.back().get());
  }
  for (const auto& game : games) {
    Serve(*system, *game);
  }
  // Each Player answers n with n + 1 and the game ends at 2 * round_trips: a lost or reordered
  // event would stop a game short of its end, which the bounded wait below reports.
  uint64_t state = 0x9e3779b97f4a7c15ULL;
  uint32_t moves = 0;
  const absl::Time deadline = absl::Now() + WaitTimeout();
  const auto all_done = [&games] {
    for (const auto& game : games) {
      if (!game->done.HasBeenNotified()) {
        return false;
      }
    }
    return true;
  };
  while (!all_done() && absl::Now() < deadline && moves < 200'000) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    pool.SetThreads(static_cast<uint32_t>(1 + state % 4));
    ++moves;
    absl::SleepFor(absl::Microseconds(200));
  }
  ASSERT_TRUE(all_done()) << moves << " moves; " << DescribeCounters(*system);
  EXPECT_GT(moves, 1u);
  const PoolCounters counters = CountersOf(*system, user);
  EXPECT_GE(counters.events, pairs * 2 * round_trips);
  EXPECT_GT(counters.threads_borrowed + counters.threads_lent, 0u);
}

TEST(PoolLendingTest, ANodeStoppedWhileThreadsAreLentEndsCleanly) {
  for (int round = 0; round < static_cast<int>(Scaled(20, 4)); ++round) {
    proto::ActorSystemConfig config;
    AddLendingPool(&config, "User", 2, 3, 1);
    AddLendingPool(&config, "Batch", 2, 3);
    config.mutable_lending()->set_period_ms(1);
    std::atomic<bool> stop{false};
    uint32_t user = 0;
    std::unique_ptr<ActorSystem> system = MakeNodeWithPool(config, "User", &user);
    ASSERT_NE(system, nullptr);
    StartKickers(*system, user, 4, absl::Microseconds(50), &stop);
    internal::Runtime* runtime = internal::RuntimeOf(*system);
    runtime->pool(1 - user).SetThreads(1);
    runtime->pool(user).SetThreads(3);
    absl::SleepFor(absl::Milliseconds(round % 5));
    // Stopped while threads are lent and the rule runs; the spinners are still going.
    system->Stop();
  }
}

TEST(PoolLendingTest, ASaturatedPoolBorrowsAnIdlePoolsThreadAndGivesItBack) {
  proto::ActorSystemConfig config;
  AddLendingPool(&config, "User", 1, 2, 1);
  AddLendingPool(&config, "Batch", 2, 2);
  config.mutable_lending()->set_budget(3);
  config.mutable_lending()->set_period_ms(5);
  config.mutable_log()->set_level("debug");
  // Before the node: its threads write to it, and its actors read `stop`, until the node stops.
  CapturingLogSink sink;
  std::atomic<bool> stop{false};
  uint32_t user = 0;
  std::unique_ptr<ActorSystem> system = MakeNodeWithPool(config, "User", &user);
  ASSERT_NE(system, nullptr);
  const uint32_t batch = 1 - user;
  StartKickers(*system, user, 4, absl::Milliseconds(1), &stop);
  EXPECT_TRUE(WaitUntil([&] {
    return CountersOf(*system, user).threads == 2 && CountersOf(*system, batch).threads == 1;
  })) << DescribeCounters(*system);
  const PoolCounters loaded = CountersOf(*system, user);
  EXPECT_EQ(loaded.min_threads, 1u);
  EXPECT_EQ(loaded.max_threads, 2u);
  EXPECT_GE(loaded.threads_borrowed, 1u);
  EXPECT_GE(CountersOf(*system, batch).threads_lent, 1u);
  // Each move is logged at debug with the figures that drove it (just after it is made).
  EXPECT_TRUE(WaitUntil([&] {
    return !LineWithAll(sink, {"thread lending: Batch -> User: backed up (User: busy",
                               "of 1 threads, queue", "from idle Batch: busy"})
                .empty();
  })) << absl::StrJoin(sink.LinesWith("thread lending"), "\n");
  stop.store(true, std::memory_order_relaxed);
  // Idle again: User gives the thread back and Batch runs its configured two.
  EXPECT_TRUE(WaitUntil([&] {
    return CountersOf(*system, user).threads == 1 && CountersOf(*system, batch).threads == 2;
  })) << DescribeCounters(*system);
  EXPECT_GE(CountersOf(*system, user).threads_lent, 1u);
  EXPECT_TRUE(WaitUntil([&] {
    return !LineWithAll(sink, {"thread lending: User -> budget: gives one back"}).empty() &&
           !LineWithAll(sink, {"thread lending: budget -> Batch: takes back"}).empty();
  })) << absl::StrJoin(sink.LinesWith("thread lending"), "\n");
}

TEST(PoolLendingTest, APoolThatLentItsLastThreadStillRunsWhatItIsSent) {
  proto::ActorSystemConfig config;
  AddLendingPool(&config, "User", 1, 2, 1);
  proto::PoolConfig* background = AddPool(&config, "Background", 1);
  background->set_min_threads(0);
  config.mutable_lending()->set_budget(2);
  config.mutable_lending()->set_period_ms(5);
  // Before the node: its actors may read them until the node stops.
  std::atomic<bool> stop{false};
  troupe::Notification handled;
  uint32_t user = 0;
  std::unique_ptr<ActorSystem> system = MakeNodeWithPool(config, "User", &user);
  ASSERT_NE(system, nullptr);
  const uint32_t other = 1 - user;
  StartKickers(*system, user, 4, absl::Milliseconds(1), &stop);
  ASSERT_TRUE(WaitUntil([&] { return CountersOf(*system, other).threads == 0; }))
      << DescribeCounters(*system);
  // User, of higher priority, is still saturated; Background's event brings its thread back.
  const ActorId answerer = system->Register(std::make_unique<FirstAnswer>(&handled), OnPool(other));
  system->Send(answerer, std::make_unique<EvValue>(1));
  EXPECT_TRUE(handled.WaitForNotificationWithTimeout(WaitTimeout())) << DescribeCounters(*system);
  EXPECT_GE(CountersOf(*system, other).threads_borrowed, 1u);
  stop.store(true, std::memory_order_relaxed);
}

TEST(PoolLendingTest, AWorkerThatLeavesTheIoLoopToRestHandsTheLoopToARunningWorker) {
  proto::ActorSystemConfig config;
  proto::PoolConfig* io = AddPool(&config, "Io", 2);
  io->set_min_threads(1);
  io->set_spin_time_us(0);
  config.mutable_lending()->set_period_ms(10'000);  // the counts move by hand only
  // What each round's blocker holds, outliving the node.
  struct Round {
    troupe::Notification entered;
    troupe::Notification release;
  };
  std::vector<std::unique_ptr<Round>> rounds;
  uint32_t index = 0;
  std::unique_ptr<ActorSystem> system = MakeNodeWithPool(config, "Io", &index);
  ASSERT_NE(system, nullptr);
  internal::ExecutorPool& pool = internal::RuntimeOf(*system)->pool(index);
  FakePoller poller;
  ASSERT_TRUE(AttachIoPoller(*system, "Io", &poller).ok());
  std::atomic<int> ran{0};
  for (int round = 1; round <= 5; ++round) {
    // Worker 0 alone waits in the loop; an event for the pool takes it out, into a handler that
    // blocks, and worker 1, let back in, waits in the loop instead.
    pool.SetThreads(1);
    ASSERT_TRUE(WaitUntil([&] { return poller.inside() == 1; })) << "round " << round;
    rounds.push_back(std::make_unique<Round>());
    const ActorId blocker = system->Register(
        std::make_unique<HandlerBlocker>(&rounds.back()->entered, &rounds.back()->release),
        OnPool(index));
    system->Send(blocker, std::make_unique<EvKick>());
    ASSERT_TRUE(rounds.back()->entered.WaitForNotificationWithTimeout(WaitTimeout()));
    pool.SetThreads(2);
    ASSERT_TRUE(WaitUntil([&] { return poller.inside() == 1; })) << "round " << round;
    // Worker 0 returns and parks on the semaphore: the loop is taken.
    const uint64_t parks = CountersOf(*system, index).parks;
    rounds.back()->release.Notify();
    ASSERT_TRUE(WaitUntil([&] { return CountersOf(*system, index).parks > parks; }))
        << "round " << round;
    // Worker 1 leaves the loop with nothing to run and rests.
    pool.SetThreads(1);
    const uint64_t waits = poller.waits();
    poller.Interrupt();
    ASSERT_TRUE(WaitUntil([&] { return poller.waits() > waits; })) << "round " << round;
    // A completion ready in the loop wakes nobody by itself: worker 0 must be waiting in it.
    poller.Post([&ran] { ran.fetch_add(1, std::memory_order_relaxed); });
    ASSERT_TRUE(WaitUntil([&] { return ran.load(std::memory_order_relaxed) == round; }))
        << "round " << round << ": nobody waits in the loop; " << DescribeCounters(*system);
  }
  DetachIoPoller(*system, &poller);
  EXPECT_EQ(poller.max_inside(), 1);
}

TEST(PoolLendingTest, APoolWhoseWorkersAreAllInLongHandlersGetsOneTemporaryThread) {
  proto::ActorSystemConfig config;
  proto::PoolConfig* slow = AddPool(&config, "Slow", 1);
  slow->set_extra_thread_after_ms(50);
  slow->set_stuck_threshold_ms(0);
  // What each episode's actors hold, outliving the node.
  struct Episode {
    troupe::Notification entered;
    troupe::Notification release;
    troupe::Notification handled;
  };
  std::vector<std::unique_ptr<Episode>> episodes;
  CapturingLogSink sink;
  uint32_t pool = 0;
  std::unique_ptr<ActorSystem> system = MakeNodeWithPool(config, "Slow", &pool);
  ASSERT_NE(system, nullptr);
  for (uint64_t episode = 1; episode <= 2; ++episode) {
    episodes.push_back(std::make_unique<Episode>());
    troupe::Notification& entered = episodes.back()->entered;
    troupe::Notification& release = episodes.back()->release;
    troupe::Notification& handled = episodes.back()->handled;
    const ActorId blocker =
        system->Register(std::make_unique<HandlerBlocker>(&entered, &release), OnPool(pool));
    const ActorId answerer =
        system->Register(std::make_unique<FirstAnswer>(&handled), OnPool(pool));
    system->Send(blocker, std::make_unique<EvKick>());
    ASSERT_TRUE(entered.WaitForNotificationWithTimeout(WaitTimeout()));
    system->Send(answerer, std::make_unique<EvValue>(1));
    // The pool's only worker is blocked: the answer comes from the temporary thread.
    EXPECT_TRUE(handled.WaitForNotificationWithTimeout(WaitTimeout())) << DescribeCounters(*system);
    EXPECT_FALSE(release.HasBeenNotified());
    PoolCounters counters = CountersOf(*system, pool);
    EXPECT_EQ(counters.threads, 2u);
    EXPECT_EQ(counters.temporary_threads, episode);
    release.Notify();
    // Retired once the handler returns.
    EXPECT_TRUE(WaitUntil([&] { return CountersOf(*system, pool).threads == 1; }))
        << DescribeCounters(*system);
    counters = CountersOf(*system, pool);
    EXPECT_EQ(counters.temporary_threads, episode);
    // Reported once per episode, and its end too.
    EXPECT_TRUE(WaitUntil([&] {
      return sink.LinesWith("pool Slow: all 1 workers have been inside handlers").size() == episode;
    })) << absl::StrJoin(sink.Lines(), "\n");
    EXPECT_TRUE(WaitUntil([&] {
      return sink.LinesWith("pool Slow: a long handler returned").size() == episode;
    })) << absl::StrJoin(sink.Lines(), "\n");
  }
}

}  // namespace
}  // namespace troupe
