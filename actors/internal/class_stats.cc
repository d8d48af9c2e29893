// SPDX-License-Identifier: Apache-2.0
#include "actors/internal/class_stats.h"

#include <utility>

#include "actors/internal/node_metrics.h"
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
  // Readers only load the stats' atomics; the registry's lock never waits for mu_. The rows are
  // in node_metrics.h.
  PublishRows(*registry_, kClassMetrics, *stats, {{"class", stats->name}}, &stats->metrics);
  return stats;
}

}  // namespace troupe::internal
