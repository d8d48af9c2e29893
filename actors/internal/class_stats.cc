// SPDX-License-Identifier: Apache-2.0
#include "actors/internal/class_stats.h"

#include <string>
#include <utility>

#include "absl/strings/ascii.h"

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
  for (auto& [label, stats] : labels_) {
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
  ClassStats*& slot = classes_[std::type_index(type)];
  if (slot != nullptr) {
    return slot;
  }
  std::string label = ClassLabel(type);
  // Room for "other" is kept: at most kMaxLabels labels, it included.
  if (!labels_.contains(label) && labels_.size() + 1 >= kMaxLabels) {
    label = "other";
  }
  std::unique_ptr<ClassStats>& stats = labels_[label];
  if (stats == nullptr) {
    stats = std::make_unique<ClassStats>();
    stats->name = label;
    // Readers only load the stats' atomics; the registry's lock never waits for mu_. The rows
    // are in node_metrics.h.
    PublishRows(*registry_, kClassMetrics, *stats, {{"class", stats->name}}, &stats->metrics);
  }
  slot = stats.get();
  return slot;
}

std::string ClassLabel(const std::type_info& type) {
  const std::string name = TypeName(&type);
  std::string label;
  label.reserve(name.size());
  for (size_t i = 0; i < name.size(); ++i) {
    if (name.compare(i, 2, "::") == 0) {
      // Drop the qualifier just copied: the identifier before "::".
      while (!label.empty() && (absl::ascii_isalnum(label.back()) || label.back() == '_')) {
        label.pop_back();
      }
      ++i;
      continue;
    }
    if (name[i] == ' ' && !label.empty() && label.back() == '>' && i + 1 < name.size() &&
        name[i + 1] == '>') {
      continue;  // "A<B<C> >" is "A<B<C>>"
    }
    label.push_back(name[i]);
  }
  if (label.size() > ClassTable::kMaxLabelLength) {
    label.resize(ClassTable::kMaxLabelLength - 3);
    label.append("...");
  }
  return label;
}

}  // namespace troupe::internal
