// SPDX-License-Identifier: Apache-2.0
//
// The stuck-handler watchdog: a handler that blocks its worker past the pool's stuck threshold is
// reported once (actor, actor class, event type, pool) while the pool's other workers keep going, a
// pool whose every worker is stuck is reported starved, and a threshold of 0 turns the reports off.
//
// Label `timing` (actors_timing_ut, Release only): the watchdog measures real time, so these tests
// block workers for real windows (up to 2 s) against thresholds of 200 ms to 1 s, and they expect
// no other handler to be descheduled beyond a threshold meanwhile.
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/actor.h"
#include "actors/actor_id.h"
#include "actors/actor_system.h"
#include "actors/event.h"
#include "actors/log.h"
#include "actors/sync.h"
#include "ut/actors/scheduling_util.h"
#include "ut/actors/test_util.h"

namespace troupe {
namespace {

using testutil::AddPool;
using testutil::kMaxHotEvents;
using testutil::LineWithAll;
using testutil::MakeNodeWithPool;
using testutil::MakeSystem;
using testutil::OnPool;
using testutil::Pair;
using testutil::RegisterPair;
using testutil::Serve;
using testutil::WaitTimeout;
using testutil::WaitUntil;

enum : EventType {
  kEvBlock = EventSpaceBegin(kUserEventSpace + 6),
  kEvSchedulingEnd,
};
static_assert(InEventSpace(kEvSchedulingEnd - 1, kUserEventSpace + 6));

// Makes a Sleeper block its worker (the event the watchdog names).
struct EvBlock final : EventLocal<EvBlock, kEvBlock> {};
// Shared by a Sleeper and its test.
struct SleeperControl {
  troupe::Notification entered;
  troupe::Notification release;
  troupe::Notification returned;
  absl::Duration limit = WaitTimeout();
};

// Blocks its worker on EvBlock until released or `limit` passes.
class Sleeper : public Actor {
 public:
  explicit Sleeper(SleeperControl* control) : Actor(&Sleeper::StateWork), control_(control) {}

 private:
  TROUPE_STATE(StateWork) {
    if (ev->type() != kEvBlock) {
      Unhandled(ev);
      return;
    }
    control_->entered.Notify();
    control_->release.WaitForNotificationWithTimeout(control_->limit);
    control_->returned.Notify();
  }

  SleeperControl* control_;
};

// Waits until `handled` has grown by `by` while the Sleeper is still inside its handler.
::testing::AssertionResult ProgressWhileBlocked(const std::atomic<uint64_t>& handled,
                                                const SleeperControl& control, uint64_t by) {
  // relaxed: a progress counter.
  const uint64_t start = handled.load(std::memory_order_relaxed);
  const bool grew =
      WaitUntil([&] { return handled.load(std::memory_order_relaxed) >= start + by; });
  if (!grew) {
    return ::testing::AssertionFailure()
           << "no progress: " << handled.load() - start << " of " << by << " events handled";
  }
  if (control.returned.HasBeenNotified()) {
    return ::testing::AssertionFailure() << "the blocked handler returned before the progress";
  }
  return ::testing::AssertionSuccess();
}

TEST(WatchdogTest, StuckHandlerIsReported) {
  CapturingLogSink sink;
  proto::ActorSystemConfig config = testutil::SmallConfig();
  // 1 s: under load a worker of the pair can be descheduled inside a handler for a few hundred
  // milliseconds, which the watchdog rightly counts as stuck too.
  AddPool(&config, "Work", 2)->set_stuck_threshold_ms(1000);
  SleeperControl control;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> handled{0};
  Pair pair;
  uint32_t pool = 0;
  auto system = MakeNodeWithPool(config, "Work", &pool);
  ASSERT_NE(system, nullptr);
  RegisterPair(*system, pool, kMaxHotEvents, &pair, &stop, &handled);
  const ActorId sleeper = system->Register(std::make_unique<Sleeper>(&control), OnPool(pool));
  Serve(*system, pair);
  system->Send(sleeper, std::make_unique<EvBlock>());
  ASSERT_TRUE(control.entered.WaitForNotificationWithTimeout(WaitTimeout()));
  const absl::Time entered_at = absl::Now();

  ASSERT_TRUE(WaitUntil([&] { return system->Counters().pools[pool].stuck_reports >= 1; }))
      << testutil::DescribeCounters(*system);
  EXPECT_TRUE(ProgressWhileBlocked(handled, control, 1000));
  // A stuck handler: it blocks for 2 s; the other actors keep going all along.
  absl::SleepFor(entered_at + absl::Seconds(2) - absl::Now());
  EXPECT_TRUE(ProgressWhileBlocked(handled, control, 1000));
  control.release.Notify();
  ASSERT_TRUE(control.returned.WaitForNotificationWithTimeout(WaitTimeout()));
  EXPECT_TRUE(WaitUntil([&] { return sink.Contains("the stuck handler returned"); }));
  stop.store(true, std::memory_order_relaxed);

  EXPECT_EQ(system->Counters().pools[pool].stuck_reports, 1u);
  const std::string line = LineWithAll(sink, {"stuck actor", sleeper.ToString(), "Sleeper)",
                                              absl::StrFormat("0x%08x", kEvBlock), "pool Work"});
  EXPECT_FALSE(line.empty()) << "no stuck report naming " << sleeper.ToString()
                             << ", Sleeper and the event; log:\n"
                             << absl::StrJoin(sink.Lines(), "\n");
  EXPECT_FALSE(sink.Contains("is starved")) << "one of two workers stuck is not starvation";
}

TEST(WatchdogTest, StarvedPoolIsReported) {
  CapturingLogSink sink;
  proto::ActorSystemConfig config = testutil::SmallConfig();
  AddPool(&config, "Solo", 1)->set_stuck_threshold_ms(200);
  SleeperControl control;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> handled{0};
  Pair pair;
  auto system = MakeSystem(config);
  ASSERT_NE(system, nullptr);
  const absl::StatusOr<uint32_t> solo = system->PoolIndex("Solo");
  const absl::StatusOr<uint32_t> user = system->PoolIndex("User");
  ASSERT_TRUE(solo.ok() && user.ok());
  const ActorId sleeper = system->Register(std::make_unique<Sleeper>(&control), OnPool(*solo));
  RegisterPair(*system, *user, kMaxHotEvents, &pair, &stop, &handled);
  Serve(*system, pair);
  system->Send(sleeper, std::make_unique<EvBlock>());
  ASSERT_TRUE(control.entered.WaitForNotificationWithTimeout(WaitTimeout()));

  EXPECT_TRUE(WaitUntil([&] { return sink.Contains("pool Solo is starved"); }))
      << "log:\n"
      << absl::StrJoin(sink.Lines(), "\n");
  EXPECT_TRUE(ProgressWhileBlocked(handled, control, 1000));
  control.release.Notify();
  ASSERT_TRUE(control.returned.WaitForNotificationWithTimeout(WaitTimeout()));
  stop.store(true, std::memory_order_relaxed);
  EXPECT_EQ(system->Counters().pools[*solo].stuck_reports, 1u);
  EXPECT_FALSE(LineWithAll(sink, {"stuck actor", sleeper.ToString()}).empty());
}

TEST(WatchdogTest, ZeroStuckThresholdReportsNothing) {
  CapturingLogSink sink;
  proto::ActorSystemConfig config = testutil::SmallConfig();
  // The other pools keep the watchdog running, with a threshold the blocked handler outlasts.
  for (proto::PoolConfig& pool : *config.mutable_pools()) {
    pool.set_stuck_threshold_ms(100);
  }
  AddPool(&config, "Quiet", 1)->set_stuck_threshold_ms(0);
  SleeperControl control;
  control.limit = absl::Milliseconds(400);
  auto system = MakeSystem(config);
  ASSERT_NE(system, nullptr);
  const absl::StatusOr<uint32_t> quiet = system->PoolIndex("Quiet");
  ASSERT_TRUE(quiet.ok()) << quiet.status();
  const ActorId sleeper = system->Register(std::make_unique<Sleeper>(&control), OnPool(*quiet));
  system->Send(sleeper, std::make_unique<EvBlock>());
  // Nobody releases it: it blocks its worker for the whole `limit`.
  ASSERT_TRUE(control.returned.WaitForNotificationWithTimeout(WaitTimeout()));

  EXPECT_EQ(system->Counters().pools[*quiet].stuck_reports, 0u);
  EXPECT_FALSE(sink.Contains("stuck")) << absl::StrJoin(sink.Lines(), "\n");
  EXPECT_FALSE(sink.Contains("starved")) << absl::StrJoin(sink.Lines(), "\n");
}

}  // namespace
}  // namespace troupe
