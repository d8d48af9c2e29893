// SPDX-License-Identifier: Apache-2.0
//
// IoPoller (actors/node_hooks.h): a pool's workers run an I/O loop, one at a time, whether they
// are idle (the loop's Wait replaces the semaphore) or busy (they poll every few activations),
// and detaching or stopping never leaves a worker inside it.
#include <atomic>
#include <functional>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/actor.h"
#include "actors/actor_system.h"
#include "actors/node_hooks.h"
#include "actors/sync.h"
#include "actors/testing/test_runtime.h"
#include "ut/actors/fake_poller.h"
#include "ut/actors/test_util.h"

namespace troupe {
namespace {

using testutil::EvKick;
using testutil::EvValue;
using testutil::FakePoller;
using testutil::kEvKick;
using testutil::kEvValue;
using testutil::WaitUntil;

// Counts the EvValues it gets.
class Counter : public Actor {
 public:
  explicit Counter(std::atomic<uint64_t>* count) : Actor(&Counter::StateWork), count_(count) {}

 private:
  TROUPE_STATE(StateWork) {
    if (ev->type() == kEvValue) {
      count_->fetch_add(1, std::memory_order_acq_rel);
    }
  }
  std::atomic<uint64_t>* count_;
};

// Keeps its worker busy by sending itself a kick until `stop` is set or its time is up.
class Busy : public Actor {
 public:
  Busy(std::atomic<bool>* stop, absl::Time until)
      : Actor(&Busy::StateWork), stop_(stop), until_(until) {}

 private:
  TROUPE_STATE(StateWork) {
    if (ev->type() == kEvKick && !stop_->load(std::memory_order_acquire) && absl::Now() < until_) {
      Send(SelfId(), std::make_unique<EvKick>());
    }
  }
  std::atomic<bool>* stop_;
  const absl::Time until_;
};

proto::ActorSystemConfig PollingConfig(uint32_t threads, uint32_t spin_us) {
  proto::ActorSystemConfig config = testutil::SmallConfig();
  proto::PoolConfig* io = config.add_pools();
  io->set_name("Io");
  io->set_threads(threads);
  io->set_spin_time_us(spin_us);
  return config;
}

TEST(IoPollerTest, AttachRefusesAnUnknownPoolASecondPollerAndADrivenNode) {
  auto system = testutil::MakeSystem(PollingConfig(1, 0));
  ASSERT_NE(system, nullptr);
  FakePoller first;
  FakePoller second;
  EXPECT_EQ(AttachIoPoller(*system, "Nope", &first).code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(AttachIoPoller(*system, "Io", &first).ok());
  EXPECT_EQ(AttachIoPoller(*system, "Io", &second).code(), absl::StatusCode::kAlreadyExists);
  DetachIoPoller(*system, &second);  // not attached: a no-op
  DetachIoPoller(*system, &first);
  EXPECT_TRUE(AttachIoPoller(*system, "Io", &second).ok()) << "detaching frees the pool";
  DetachIoPoller(*system, &second);
  EXPECT_EQ(first.inside() + second.inside(), 0);

  testing::TestRuntime runtime({.nodes = 1});
  EXPECT_EQ(AttachIoPoller(runtime.node(1), "User", &first).code(),
            absl::StatusCode::kFailedPrecondition);
}

// Handlers posted from outside threads wake an idle worker parked in the loop; events they send
// to actors of the pool are delivered; never two workers are inside the loop at once.
void RunPostedHandlers(uint32_t threads, uint32_t spin_us) {
  auto system = testutil::MakeSystem(PollingConfig(threads, spin_us));
  ASSERT_NE(system, nullptr);
  const absl::StatusOr<uint32_t> pool = system->PoolIndex("Io");
  ASSERT_TRUE(pool.ok());
  std::atomic<uint64_t> received{0};
  const ActorId counter =
      system->Register(std::make_unique<Counter>(&received), RegisterOptions{.pool = *pool});
  FakePoller poller;
  ASSERT_TRUE(AttachIoPoller(*system, "Io", &poller).ok());

  constexpr int kPosters = 2;
  constexpr int kPerPoster = 3000;
  std::vector<std::thread> posters;
  posters.reserve(kPosters);
  for (int p = 0; p < kPosters; ++p) {
    posters.emplace_back([&, p] {
      for (int i = 0; i < kPerPoster; ++i) {
        poller.Post([&system, counter, value = uint64_t(p * kPerPoster + i)] {
          system->Send(counter, std::make_unique<EvValue>(value));
        });
        if (i % 100 == 0) {
          poller.Interrupt();  // stray interrupts only end a wait early
        }
        if (i % 500 == 0) {
          absl::SleepFor(absl::Microseconds(200));  // let the workers park in between
        }
      }
    });
  }
  for (std::thread& poster : posters) {
    poster.join();
  }
  // The last posts may land after the worker's final check: an Interrupt ends its wait, as a
  // transport's post would.
  poller.Interrupt();
  EXPECT_TRUE(WaitUntil([&] { return received.load() == uint64_t{kPosters * kPerPoster}; }))
      << "received " << received.load() << " of " << kPosters * kPerPoster << "; "
      << testutil::DescribeCounters(*system);
  DetachIoPoller(*system, &poller);
  EXPECT_EQ(poller.inside(), 0) << "Detach returned with a worker inside the loop";
  EXPECT_EQ(poller.max_inside(), 1) << "two workers were inside the loop at once";
  EXPECT_GT(poller.waits() + poller.polls(), 0U);
}

TEST(IoPollerTest, PostedHandlersRunOnOneWorkerAtATime) { RunPostedHandlers(3, 5); }

TEST(IoPollerTest, PostedHandlersRunWithoutSpinning) { RunPostedHandlers(1, 0); }

// A worker kept busy by an actor that never lets its queue empty still runs the loop.
TEST(IoPollerTest, ABusyWorkerStillPolls) {
  // Before the system: the busy actor may read it until the system has stopped.
  std::atomic<bool> stop{false};
  auto system = testutil::MakeSystem(PollingConfig(1, 0));
  ASSERT_NE(system, nullptr);
  const absl::StatusOr<uint32_t> pool = system->PoolIndex("Io");
  ASSERT_TRUE(pool.ok());
  FakePoller poller;
  ASSERT_TRUE(AttachIoPoller(*system, "Io", &poller).ok());
  const ActorId busy =
      system->Register(std::make_unique<Busy>(&stop, absl::Now() + testutil::WaitTimeout()),
                       RegisterOptions{.pool = *pool});
  system->Send(busy, std::make_unique<EvKick>());
  std::atomic<bool> ran{false};
  poller.Post([&] {
    ran.store(true, std::memory_order_release);
    stop.store(true, std::memory_order_release);
  });
  // No Interrupt: the worker never parks while the actor keeps it busy.
  EXPECT_TRUE(WaitUntil([&] { return ran.load(std::memory_order_acquire); }))
      << "the busy worker never polled: " << testutil::DescribeCounters(*system);
  stop.store(true, std::memory_order_release);
  DetachIoPoller(*system, &poller);
  EXPECT_EQ(poller.max_inside(), 1);
}

// A node stopped while its worker waits in the loop ends the wait; detaching afterwards returns.
TEST(IoPollerTest, StoppingTheNodeEndsAWaitInTheLoop) {
  auto system = testutil::MakeSystem(PollingConfig(2, 0));
  ASSERT_NE(system, nullptr);
  FakePoller poller;
  ASSERT_TRUE(AttachIoPoller(*system, "Io", &poller).ok());
  ASSERT_TRUE(WaitUntil([&] { return poller.inside() == 1; }))
      << "no idle worker waited in the loop";
  system->Stop();
  EXPECT_EQ(poller.inside(), 0);
  DetachIoPoller(*system, &poller);
}

}  // namespace
}  // namespace troupe
