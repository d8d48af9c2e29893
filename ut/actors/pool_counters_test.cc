// SPDX-License-Identifier: Apache-2.0
//
// The executor pool counters (ActorSystem::Counters().pools): a fresh pool reports its name, its
// workers and nothing done; after a known load the pool totals count every event and activation,
// and the per-worker counters sum to the pool totals. The idle-CPU check is a real-time window and
// lives in pool_counters_timing_test.cc.
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/actor_id.h"
#include "actors/actor_system.h"
#include "ut/actors/scheduling_util.h"
#include "ut/actors/test_util.h"

namespace troupe {
namespace {

using testutil::AddPool;
using testutil::EventCounter;
using testutil::EvValue;
using testutil::MakeNodeWithPool;
using testutil::OnPool;
using testutil::WaitUntil;

TEST(PoolCountersTest, PerWorkerCountersSumToPoolTotals) {
  constexpr uint32_t kThreads = 3;
  constexpr int kActors = 10;
  constexpr uint64_t kPerActor = 100;
  proto::ActorSystemConfig config = testutil::SmallConfig();
  AddPool(&config, "Count", kThreads);
  std::atomic<uint64_t> count{0};
  uint32_t pool = 0;
  auto system = MakeNodeWithPool(config, "Count", &pool);
  ASSERT_NE(system, nullptr);

  const PoolCounters fresh = system->Counters().pools[pool];
  EXPECT_EQ(fresh.name, "Count");
  EXPECT_EQ(fresh.threads, kThreads);
  EXPECT_EQ(fresh.workers.size(), kThreads);
  EXPECT_EQ(fresh.queue_length, 0);
  EXPECT_EQ(fresh.events, 0u);

  std::vector<ActorId> actors;
  actors.reserve(kActors);
  for (int i = 0; i < kActors; ++i) {
    actors.push_back(system->Register(std::make_unique<EventCounter>(&count), OnPool(pool)));
  }
  for (uint64_t v = 0; v < kPerActor; ++v) {
    for (const ActorId& actor : actors) {
      system->Send(actor, std::make_unique<EvValue>(v));
    }
  }
  const uint64_t expected_events = kActors * (kPerActor + 1);  // Bootstrap included
  ASSERT_TRUE(WaitUntil([&] { return system->Counters().pools[pool].events >= expected_events; }))
      << testutil::DescribeCounters(*system);
  EXPECT_EQ(count.load(std::memory_order_relaxed), kActors * kPerActor);

  const PoolCounters c = system->Counters().pools[pool];
  EXPECT_EQ(c.events, expected_events);
  EXPECT_EQ(c.queue_length, 0);
  EXPECT_GT(c.busy_time, absl::ZeroDuration());
  EXPECT_GT(c.cpu_time, absl::ZeroDuration());
  // Not activations <= events: an activation that finds a sender mid-push handles nothing and
  // queues the mailbox again.
  EXPECT_GE(c.activations, static_cast<uint64_t>(kActors));
  EXPECT_EQ(c.stuck_reports, 0u);
  ASSERT_EQ(c.workers.size(), kThreads);
  uint64_t events = 0;
  uint64_t activations = 0;
  uint64_t steals = 0;
  for (const WorkerCounters& worker : c.workers) {
    events += worker.events;
    activations += worker.activations;
    steals += worker.steals;
  }
  EXPECT_EQ(events, c.events);
  EXPECT_EQ(activations, c.activations);
  EXPECT_EQ(steals, c.steals);
  // A pool that never ran anything has nothing queued either.
  const absl::StatusOr<uint32_t> batch = system->PoolIndex("Batch");
  ASSERT_TRUE(batch.ok());
  EXPECT_EQ(system->Counters().pools[*batch].queue_length, 0);
}

}  // namespace
}  // namespace troupe
