// SPDX-License-Identifier: Apache-2.0
//
// The shuffle debug aid (proto ShuffleConfig) on the real multi-threaded runtime: it changes the
// order in which ready mailboxes run, reproducibly on one worker, and keeps every guarantee.
#include <algorithm>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <optional>
#include <vector>

#include "gtest/gtest.h"

#include "actors/actor.h"
#include "actors/actor_system.h"
#include "actors/log.h"
#include "ut/actors/test_util.h"

namespace troupe {
namespace {

using testutil::EvValue;

// Records its index, under the mutex, in the order the actors ran.
class Runner : public Actor {
 public:
  Runner(int index, troupe::Mutex* mu, std::vector<int>* order)
      : Actor(&Runner::StateWork), index_(index), mu_(mu), order_(order) {}

 private:
  TROUPE_STATE(StateWork) {
    troupe::MutexLock lock(mu_);
    order_->push_back(index_);
  }
  int index_;
  troupe::Mutex* mu_;
  std::vector<int>* order_;
};

// Registers n Runners and kicks each from its Bootstrap, so every one of them becomes ready while
// this activation still runs. (Nothing reaches the pool from another thread after the Fanout's own
// registration: on one worker the shuffle's choices then repeat exactly.)
class Fanout : public Actor {
 public:
  Fanout(int n, troupe::Mutex* mu, std::vector<int>* order)
      : Actor(&Fanout::StateWork), n_(n), mu_(mu), order_(order) {}

  void Bootstrap() override {
    std::vector<ActorId> runners;
    for (int i = 0; i < n_; ++i) {
      runners.push_back(Register(std::make_unique<Runner>(i, mu_, order_)));
    }
    for (const ActorId& runner : runners) {
      Send(runner, std::make_unique<EvValue>(0));
    }
  }

 private:
  TROUPE_STATE(StateWork) { Unhandled(ev); }
  int n_;
  troupe::Mutex* mu_;
  std::vector<int>* order_;
};

// Runs 40 Runners made ready by one handler on a one-worker pool; returns the order they ran in.
std::vector<int> RunOrder(std::optional<uint64_t> shuffle_seed) {
  proto::ActorSystemConfig config;
  proto::PoolConfig* pool = config.add_pools();
  pool->set_name("User");
  pool->set_threads(1);
  if (shuffle_seed.has_value()) {
    config.mutable_shuffle()->set_enabled(true);
    config.mutable_shuffle()->set_seed(*shuffle_seed);
  }
  std::unique_ptr<ActorSystem> system = testutil::MakeSystem(config);
  if (system == nullptr) {
    return {};
  }
  troupe::Mutex mu;
  std::vector<int> order;
  constexpr int kRunners = 40;
  // Bootstrap does not reach the state function: one entry per runner, for its kick.
  system->Register(std::make_unique<Fanout>(kRunners, &mu, &order));
  EXPECT_TRUE(testutil::WaitUntil([&] {
    troupe::MutexLock lock(&mu);
    return order.size() == kRunners;
  }));
  system->Stop();
  return order;
}

TEST(ShuffleTest, ReordersReadyMailboxesReproduciblyOnOneWorker) {
#if !defined(TROUPE_ENABLE_SHUFFLE)
  CapturingLogSink sink;
  EXPECT_EQ(RunOrder(1), RunOrder(std::nullopt));
  EXPECT_TRUE(sink.Contains("without TROUPE_ENABLE_SHUFFLE"));
  GTEST_SKIP() << "this build ignores the shuffle config (TROUPE_ENABLE_SHUFFLE is off)";
#else
  if (std::getenv("TROUPE_SHUFFLE") != nullptr) {
    GTEST_SKIP() << "TROUPE_SHUFFLE is set: every system shuffles, there is no plain order";
  }
  CapturingLogSink sink;
  const std::vector<int> plain = RunOrder(std::nullopt);
  const std::vector<int> shuffled = RunOrder(7);
  const std::vector<int> again = RunOrder(7);
  const std::vector<int> other = RunOrder(8);
  ASSERT_EQ(plain.size(), 40u);
  EXPECT_NE(shuffled, plain);
  EXPECT_EQ(shuffled, again) << "one worker and one seed: the order must repeat";
  EXPECT_NE(shuffled, other);
  std::vector<int> sorted = shuffled;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int> expected(40);
  std::iota(expected.begin(), expected.end(), 0);
  EXPECT_EQ(sorted, expected) << "every runner ran exactly once";
  EXPECT_TRUE(sink.Contains("shuffling ready mailboxes, seed 7"));
#endif
}

}  // namespace
}  // namespace troupe
