// SPDX-License-Identifier: Apache-2.0
//
// ClassTable: one node's figures per actor class, published in its metrics registry as
// troupe_actor_class_*{class="..."} when a class is first seen:
//
//   | figure                  | how it is counted                                              |
//   |-------------------------|----------------------------------------------------------------|
//   | live actors             | exact: +1 at registration, -1 when the actor ends               |
//   | events (sampled)        | 1 in kSampleEvery events a worker handles (ExecutorPool::Run)  |
//   | handler time (sampled)  | the time of those same sampled handlers                        |
//
// Sampling keeps the per-event cost to one decrement and branch; the sampled counts times
// kSampleEvery estimate the events, and their shares name the busiest classes (status page).
// The live count is sharded over cache lines so that workers spawning and ending actors of one
// class (skynet) do not fight over one counter, and a one-entry per-thread cache keeps the
// lookup of a class that was just seen lock-free.
//
// The label is short and the labels are bounded, so that a scrape stays small whatever the code
// instantiates: namespaces are dropped, also inside template arguments ("app::Cart<app::Item>" is
// "Cart<Item>"), a label is cut at kMaxLabelLength characters, and classes first seen after
// kMaxLabels distinct labels share the label "other". Classes with the same label share figures.
//
// Thread-safety: thread-safe. Stats live as long as the table.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <typeindex>
#include <typeinfo>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"

#include "actors/metrics.h"
#include "actors/sync.h"

namespace troupe::internal {

// The figures of one actor class.
struct ClassStats {
  static constexpr size_t kShards = 4;
  struct alignas(64) Shard {
    std::atomic<int64_t> live{0};
  };

  std::string name;
  std::array<Shard, kShards> live;
  alignas(64) std::atomic<uint64_t> sampled_events{0};
  std::atomic<uint64_t> sampled_handler_ns{0};
  std::vector<MetricsRegistry::Registration> metrics;

  // Adds `delta` to the live count in the calling thread's shard.
  void AddLive(int64_t delta);
  int64_t Live() const;
};

class ClassTable {
 public:
  // A worker samples one event in this many.
  static constexpr uint32_t kSampleEvery = 64;
  static constexpr size_t kMaxLabelLength = 64;
  static constexpr size_t kMaxLabels = 256;

  explicit ClassTable(MetricsRegistry* registry);
  ~ClassTable();
  ClassTable(const ClassTable&) = delete;
  ClassTable& operator=(const ClassTable&) = delete;
  ClassTable(ClassTable&&) = delete;
  ClassTable& operator=(ClassTable&&) = delete;

  // Returns the stats of the class `type`, creating and publishing them on first use.
  ClassStats& Get(const std::type_info& type);

 private:
  ClassStats* Create(const std::type_info& type);

  MetricsRegistry* const registry_;
  // Tells this table's entries apart from another's in the per-thread cache (never reused).
  const uint64_t generation_;
  troupe::Mutex mu_;
  absl::flat_hash_map<std::type_index, ClassStats*> classes_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::unique_ptr<ClassStats>> labels_ ABSL_GUARDED_BY(mu_);
};

// Returns the label of the class `type`: its demangled name without namespaces, at most
// ClassTable::kMaxLabelLength characters ("Cart<Item>" for app::Cart<app::Item>).
std::string ClassLabel(const std::type_info& type);

}  // namespace troupe::internal
