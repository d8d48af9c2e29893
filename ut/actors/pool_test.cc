// SPDX-License-Identifier: Apache-2.0
//
// Executor pool behaviour seen from actors: how parked workers are woken, and the niceness of a
// pool's workers.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <memory>
#include <string_view>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/actor.h"
#include "actors/actor_system.h"
#include "ut/actors/test_util.h"

namespace troupe {
namespace {

using testutil::EvKick;
using testutil::kEvKick;
using testutil::WaitUntil;

constexpr int kWorkers = 4;

// Where the blockers meet: each arrives, then waits (bounded) until all kWorkers are inside a
// handler at the same time, which needs kWorkers distinct workers.
struct Rendezvous {
  std::atomic<int> arrived{0};
  std::atomic<int> met{0};
  std::atomic<int> finished{0};
};

class Blocker : public Actor {
 public:
  explicit Blocker(Rendezvous* rendezvous) : Actor(&Blocker::StateWork), rendezvous_(rendezvous) {}

 private:
  void Bootstrap() override {
    rendezvous_->arrived.fetch_add(1, std::memory_order_acq_rel);
    // Blocking a worker is what this test probes; the wait is bounded so a failure cannot hang.
    if (WaitUntil(
            [this] { return rendezvous_->arrived.load(std::memory_order_acquire) == kWorkers; },
            absl::Seconds(5))) {
      rendezvous_->met.fetch_add(1, std::memory_order_acq_rel);
    }
    rendezvous_->finished.fetch_add(1, std::memory_order_acq_rel);
    PassAway();
  }

  TROUPE_STATE(StateWork) { Unhandled(ev); }

  Rendezvous* rendezvous_;
};

// Registers kWorkers blockers from one handler: they are published to the pool as one batch.
class PoolSpawner : public Actor {
 public:
  PoolSpawner(Rendezvous* rendezvous, uint32_t pool)
      : Actor(&PoolSpawner::StateWork), rendezvous_(rendezvous), pool_(pool) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      case kEvKick: {
        RegisterOptions options;
        options.pool = pool_;
        for (int i = 0; i < kWorkers; ++i) {
          Register(std::make_unique<Blocker>(rendezvous_), options);
        }
        break;
      }
      default:
        Unhandled(ev);
    }
  }

  Rendezvous* rendezvous_;
  uint32_t pool_;
};

TEST(PoolTest, BatchPublishWakesEveryParkedWorker) {
  proto::ActorSystemConfig config = testutil::SmallConfig();
  proto::PoolConfig* wide = config.add_pools();
  wide->set_name("Wide");
  wide->set_threads(kWorkers);
  wide->set_spin_time_us(0);
  auto system = testutil::MakeSystem(config);
  ASSERT_NE(system, nullptr);
  const absl::StatusOr<uint32_t> pool = system->PoolIndex("Wide");
  ASSERT_TRUE(pool.ok());

  auto wide_parks = [&] { return system->Counters().pools[*pool].parks; };
  ASSERT_TRUE(WaitUntil([&] { return wide_parks() >= kWorkers; }))
      << "the idle Wide workers never parked: " << testutil::DescribeCounters(*system);

  Rendezvous rendezvous;
  RegisterOptions options;
  options.pool = *pool;
  const ActorId spawner =
      system->Register(std::make_unique<PoolSpawner>(&rendezvous, *pool), options);
  system->Send(spawner, std::make_unique<EvKick>());

  ASSERT_TRUE(WaitUntil([&] {
    return rendezvous.finished.load(std::memory_order_acquire) == kWorkers;
  })) << testutil::DescribeCounters(*system);
  EXPECT_EQ(rendezvous.met.load(), kWorkers)
      << "the blockers never ran on " << kWorkers << " workers at once: a parked worker was left "
      << "asleep while mailboxes waited in the queue";
}

// Reports the niceness of the worker thread that handles its EvKick.
class NicenessProbe : public Actor {
 public:
  static constexpr int kUnset = 100;
  static constexpr int kUnreadable = 200;

  explicit NicenessProbe(std::atomic<int>* niceness)
      : Actor(&NicenessProbe::StateWork), niceness_(niceness) {}

 private:
  TROUPE_STATE(StateWork) {
    if (ev->type() != kEvKick) {
      Unhandled(ev);
      return;
    }
    errno = 0;
    const int value = ::getpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()));
    niceness_->store(value == -1 && errno != 0 ? kUnreadable : value, std::memory_order_release);
  }

  std::atomic<int>* niceness_;
};

TEST(PoolTest, NiceLowersThePriorityOfThePoolsWorkersOnly) {
  errno = 0;
  const int base = ::getpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()));
  ASSERT_FALSE(base == -1 && errno != 0);
  proto::ActorSystemConfig config = testutil::SmallConfig();
  for (const char* name : {"Background", "Capped"}) {
    proto::PoolConfig* pool = config.add_pools();
    pool->set_name(name);
    pool->set_threads(2);
    pool->set_nice(std::string_view(name) == "Background" ? 5 : 19);
  }
  auto system = testutil::MakeSystem(config);
  ASSERT_NE(system, nullptr);

  auto niceness_on = [&](std::string_view pool_name) {
    std::atomic<int> niceness{NicenessProbe::kUnset};
    RegisterOptions options;
    options.pool = *system->PoolIndex(pool_name);
    system->Send(system->Register(std::make_unique<NicenessProbe>(&niceness), options),
                 std::make_unique<EvKick>());
    EXPECT_TRUE(WaitUntil(
        [&] { return niceness.load(std::memory_order_acquire) != NicenessProbe::kUnset; }));
    return niceness.load(std::memory_order_acquire);
  };
  EXPECT_EQ(niceness_on("Background"), std::min(base + 5, 19));
  EXPECT_EQ(niceness_on("Capped"), 19) << "the sum stops at Linux's 19";
  EXPECT_EQ(niceness_on(config.pools(0).name()), base) << "a pool without nice is left alone";
}

}  // namespace
}  // namespace troupe
