// SPDX-License-Identifier: Apache-2.0
#include "interconnect/internal/refusal_log.h"

#include <utility>

namespace troupe::interconnect::internal {

bool RefusalLog::Report(Direction direction, std::string_view remote, std::string_view reason) {
  counts_[static_cast<int>(direction)].fetch_add(1, std::memory_order_relaxed);
  std::string key(remote);
  troupe::MutexLock lock(&mu_);
  auto it = last_.find(key);
  if (it != last_.end()) {
    if (it->second == reason) {
      return false;
    }
    it->second = std::string(reason);
    return true;
  }
  if (last_.size() >= kMaxRemembered) {
    last_.clear();
  }
  last_.emplace(std::move(key), std::string(reason));
  return true;
}

void RefusalLog::Clear(std::string_view remote) {
  const std::string key(remote);
  troupe::MutexLock lock(&mu_);
  last_.erase(key);
}

std::vector<MetricsRegistry::Registration> RefusalLog::PublishMetrics(
    MetricsRegistry& registry) const {
  std::vector<MetricsRegistry::Registration> metrics;
  for (const auto& [direction, name] :
       {std::pair{Direction::kIncoming, "incoming"}, std::pair{Direction::kOutgoing, "outgoing"}}) {
    const std::atomic<uint64_t>& count = counts_[static_cast<int>(direction)];
    metrics.push_back(registry.Add(
        {"troupe_interconnect_refusals_total",
         MetricType::kCounter,
         "Connections refused: by this node (incoming) or by a peer, or a peer's answer refused "
         "by this node (outgoing).",
         {{"direction", name}}},
        [&count] { return static_cast<int64_t>(count.load(std::memory_order_relaxed)); }));
  }
  return metrics;
}

}  // namespace troupe::interconnect::internal
