// SPDX-License-Identifier: Apache-2.0
#include "actors/internal/class_stats.h"

#include <utility>

#include "actors/log.h"

namespace troupe::internal {
namespace {

std::atomic<uint64_t> g_next_generation{1};

// The class last looked up on this thread.
struct CachedClass {
  uint64_t generation = 0;
  const std::type_info* type = nullptr;
  ClassStats* stats = nullptr;
};
thread_local constinit CachedClass tls_cached_class;

// This thread's live-count shard: threads take shards in turn.
size_t ShardOfThisThread() {
  static std::atomic<size_t> next{0};
  thread_local const size_t shard =
      next.fetch_add(1, std::memory_order_relaxed) % ClassStats::kShards;
  return shard;
}

}  // namespace

void ClassStats::AddLive(int64_t delta) {
  // Relaxed: an independent count, read by the metrics.
  live[ShardOfThisThread()].live.fetch_add(delta, std::memory_order_relaxed);
}

int64_t ClassStats::Live() const {
  int64_t sum = 0;
  for (const Shard& shard : live) {
    sum += shard.live.load(std::memory_order_relaxed);
  }
  return sum;
}

ClassTable::ClassTable(MetricsRegistry* registry)
    : registry_(registry), generation_(g_next_generation.fetch_add(1, std::memory_order_relaxed)) {}

ClassTable::~ClassTable() {
  // The registrations go before the stats they read.
  troupe::MutexLock lock(&mu_);
  for (auto& [type, stats] : classes_) {
    stats->metrics.clear();
  }
}

ClassStats& ClassTable::Get(const std::type_info& type) {
  CachedClass& cached = tls_cached_class;
  if (cached.generation == generation_ && cached.type == &type) {
    return *cached.stats;
  }
  ClassStats* stats = Create(type);
  cached = {.generation = generation_, .type = &type, .stats = stats};
  return *stats;
}

ClassStats* ClassTable::Create(const std::type_info& type) {
  troupe::MutexLock lock(&mu_);
  std::unique_ptr<ClassStats>& slot = classes_[std::type_index(type)];
  if (slot != nullptr) {
    return slot.get();
  }
  slot = std::make_unique<ClassStats>();
  ClassStats* stats = slot.get();
  stats->name = TypeName(&type);
  // Readers only load the stats' atomics; the registry's lock never waits for mu_.
  const MetricLabels labels = {{"class", stats->name}};
  stats->metrics.push_back(registry_->Add(
      {"troupe_actor_class_live", MetricType::kGauge, "Actors of the class alive.", labels},
      [stats] { return stats->Live(); }));
  stats->metrics.push_back(registry_->Add(
      {"troupe_actor_class_sampled_events_total", MetricType::kCounter,
       "Events handled by actors of the class, counting one in 64 (times 64: an estimate).",
       labels},
      [stats] {
        return static_cast<int64_t>(stats->sampled_events.load(std::memory_order_relaxed));
      }));
  stats->metrics.push_back(registry_->Add(
      {"troupe_actor_class_sampled_handler_nanoseconds_total", MetricType::kCounter,
       "Time in the handlers of the sampled events of the class.", labels},
      [stats] {
        return static_cast<int64_t>(stats->sampled_handler_ns.load(std::memory_order_relaxed));
      }));
  return stats;
}

}  // namespace troupe::internal
