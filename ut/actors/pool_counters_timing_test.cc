// SPDX-License-Identifier: Apache-2.0
//
// The pool counters over a real-time window: a pool whose workers have parked burns (almost) no CPU
// and counts the time as parked, not busy.
//
// Label `timing` (actors_timing_ut, Release only): the test sleeps one real second and asserts that
// the pool's CPU time grew by less than 20 ms, a claim about the machine as much as about the code.
#include <array>
#include <cstdint>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/actor_system.h"
#include "ut/actors/scheduling_util.h"
#include "ut/actors/test_util.h"

namespace troupe {
namespace {

using testutil::AddPool;
using testutil::MakeNodeWithPool;
using testutil::Pair;
using testutil::RegisterPair;
using testutil::Scaled;
using testutil::Serve;
using testutil::WaitTimeout;
using testutil::WaitUntil;

TEST(PoolCountersTest, IdlePoolUsesNoCpu) {
  proto::ActorSystemConfig config = testutil::SmallConfig();
  AddPool(&config, "Idle", 2)->clear_spin_time_us();  // the default spin
  std::array<Pair, 2> pairs;
  uint32_t pool = 0;
  auto system = MakeNodeWithPool(config, "Idle", &pool);
  ASSERT_NE(system, nullptr);
  const uint64_t round_trips = Scaled(2'000, 200);
  for (Pair& pair : pairs) {
    RegisterPair(*system, pool, round_trips, &pair);
    Serve(*system, pair);
  }
  for (Pair& pair : pairs) {
    ASSERT_TRUE(pair.done.WaitForNotificationWithTimeout(WaitTimeout()));
  }
  // Every activation is over (its events are counted when it ends); the workers then spin for
  // 20 us and park.
  const uint64_t total_events = pairs.size() * (2 * round_trips + 2);  // Bootstraps included
  ASSERT_TRUE(WaitUntil([&] { return system->Counters().pools[pool].events >= total_events; }))
      << testutil::DescribeCounters(*system);
  const PoolCounters before = system->Counters().pools[pool];
  const absl::Time idle_start = absl::Now();
  // The idle period under test (a real-time window, not a wait for a condition).
  absl::SleepFor(absl::Seconds(1));
  const PoolCounters after = system->Counters().pools[pool];
  const absl::Duration idle = absl::Now() - idle_start;

  EXPECT_LT(after.cpu_time - before.cpu_time, absl::Milliseconds(20))
      << "idle workers burned CPU over " << idle;
  EXPECT_LT(after.busy_time - before.busy_time, idle / 10)
      << "idle workers counted as busy over " << idle;
  EXPECT_EQ(after.events, before.events);
  // Two workers parked for the whole period: close to 2 * idle. Half of one is plenty of margin.
  EXPECT_GE(after.parked_time - before.parked_time, idle / 2)
      << "parked_time did not grow while both workers were parked (parks " << before.parks << " -> "
      << after.parks << ", parked_time " << before.parked_time << " -> " << after.parked_time
      << ")";
}

}  // namespace
}  // namespace troupe
