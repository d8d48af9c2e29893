// SPDX-License-Identifier: Apache-2.0
//
// The executor pool counters (ActorSystem::Counters().pools): a fresh pool reports its name, its
// workers and nothing done; after a known load the pool totals count every event and activation,
// and the per-worker counters sum to the pool totals. The idle-CPU check is a real-time window and
// lives in pool_counters_timing_test.cc.
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/actor_id.h"
#include "actors/actor_system.h"
#include "actors/metrics.h"
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

// Each field of PoolCounters against the registry's series of its metric, named here as a
// dashboard names them: a field filled from another metric, or from none, falls outside what the
// registry held just before and just after the view was read.
TEST(PoolCountersTest, EachFieldReadsItsMetricFromTheRegistry) {
  constexpr uint32_t kThreads = 2;
  constexpr uint64_t kEvents = 100;
  proto::ActorSystemConfig config = testutil::SmallConfig();
  AddPool(&config, "Count", kThreads);
  std::atomic<uint64_t> count{0};
  uint32_t pool = 0;
  auto system = MakeNodeWithPool(config, "Count", &pool);
  ASSERT_NE(system, nullptr);
  const ActorId actor = system->Register(std::make_unique<EventCounter>(&count), OnPool(pool));
  for (uint64_t v = 0; v < kEvents; ++v) {
    system->Send(actor, std::make_unique<EvValue>(v));
  }
  ASSERT_TRUE(WaitUntil([&] { return count.load(std::memory_order_relaxed) == kEvents; }));

  struct Field {
    std::string_view metric;
    bool per_worker;
    std::function<int64_t(const PoolCounters&)> read;
  };
  auto count_of = [](uint64_t PoolCounters::*field) {
    return [field](const PoolCounters& c) { return static_cast<int64_t>(c.*field); };
  };
  auto nanos_of = [](absl::Duration PoolCounters::*field) {
    return [field](const PoolCounters& c) { return absl::ToInt64Nanoseconds(c.*field); };
  };
  const std::vector<Field> fields = {
      {"troupe_pool_threads", false, [](const PoolCounters& c) { return int64_t{c.threads}; }},
      {"troupe_pool_threads_min", false,
       [](const PoolCounters& c) { return int64_t{c.min_threads}; }},
      {"troupe_pool_threads_max", false,
       [](const PoolCounters& c) { return int64_t{c.max_threads}; }},
      {"troupe_pool_threads_borrowed_total", false, count_of(&PoolCounters::threads_borrowed)},
      {"troupe_pool_threads_lent_total", false, count_of(&PoolCounters::threads_lent)},
      {"troupe_pool_temporary_threads_total", false, count_of(&PoolCounters::temporary_threads)},
      {"troupe_pool_queue_length", false, [](const PoolCounters& c) { return c.queue_length; }},
      {"troupe_pool_handlers_running", false,
       [](const PoolCounters& c) { return c.handlers_running; }},
      {"troupe_pool_stuck_reports_total", false, count_of(&PoolCounters::stuck_reports)},
      {"troupe_pool_events_total", true, count_of(&PoolCounters::events)},
      {"troupe_pool_activations_total", true, count_of(&PoolCounters::activations)},
      {"troupe_pool_steals_total", true, count_of(&PoolCounters::steals)},
      {"troupe_pool_budget_preemptions_total", true, count_of(&PoolCounters::budget_preemptions)},
      {"troupe_pool_parks_total", true, count_of(&PoolCounters::parks)},
      {"troupe_pool_busy_seconds_total", true, nanos_of(&PoolCounters::busy_time)},
      {"troupe_pool_parked_seconds_total", true, nanos_of(&PoolCounters::parked_time)},
      {"troupe_pool_cpu_seconds_total", true, nanos_of(&PoolCounters::cpu_time)},
  };
  const MetricsRegistry& metrics = system->metrics();
  const MetricLabels of_pool = {{"pool", "Count"}};
  const MetricLabels of_worker = {{"pool", "Count"}, {"worker", "1"}};
  std::vector<int64_t> before;
  for (const Field& field : fields) {
    EXPECT_TRUE(metrics.Value(field.metric, field.per_worker ? of_worker : of_pool).has_value())
        << field.metric;
    before.push_back(metrics.Sum(field.metric, of_pool));
  }
  // Per worker: the registry's value (-1 when missing) and the view's, for each per-worker field.
  const std::vector<std::pair<std::string_view, uint64_t WorkerCounters::*>> worker_fields = {
      {"troupe_pool_events_total", &WorkerCounters::events},
      {"troupe_pool_activations_total", &WorkerCounters::activations},
      {"troupe_pool_steals_total", &WorkerCounters::steals},
  };
  auto worker_value = [&](std::string_view metric, uint32_t worker) {
    return metrics.Value(metric, {{"pool", "Count"}, {"worker", std::to_string(worker)}})
        .value_or(-1);
  };
  std::vector<int64_t> workers_before;
  for (uint32_t w = 0; w < kThreads; ++w) {
    for (const auto& [metric, field] : worker_fields) {
      workers_before.push_back(worker_value(metric, w));
    }
  }
  const PoolCounters view = system->Counters().pools[pool];
  for (size_t i = 0; i < fields.size(); ++i) {
    EXPECT_LE(before[i], fields[i].read(view)) << fields[i].metric;
    EXPECT_LE(fields[i].read(view), metrics.Sum(fields[i].metric, of_pool)) << fields[i].metric;
  }
  ASSERT_EQ(view.workers.size(), kThreads);
  size_t i = 0;
  for (uint32_t w = 0; w < kThreads; ++w) {
    for (const auto& [metric, field] : worker_fields) {
      const auto read = static_cast<int64_t>(view.workers[w].*field);
      EXPECT_LE(workers_before[i++], read) << metric << " of worker " << w;
      EXPECT_LE(read, worker_value(metric, w)) << metric << " of worker " << w;
    }
  }
  // The fields that this load surely moved are not read as the 0 of a missing metric.
  EXPECT_EQ(view.threads, kThreads);
  EXPECT_GE(view.events, kEvents + 1);  // Bootstrap included
  EXPECT_GT(view.activations, 0u);
  EXPECT_GT(view.busy_time, absl::ZeroDuration());
  EXPECT_GT(view.cpu_time, absl::ZeroDuration());
}

}  // namespace
}  // namespace troupe
