// SPDX-License-Identifier: Apache-2.0
#include "actors/internal/dead_letters.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_format.h"

#include "actors/log.h"

namespace troupe::internal {

DeadLetters::DeadLetters(MetricsRegistry* metrics, int log_per_second)
    : metrics_(metrics), log_per_second_(log_per_second) {
  notices_metric_ = metrics_->Add(
      {"troupe_dropped_notices_total",
       MetricType::kCounter,
       "The runtime's own notices (timer wake-ups, delivery and session notices) dropped because "
       "their recipient had ended: not dead letters.",
       {}},
      [this] { return static_cast<int64_t>(notices_.load(std::memory_order_relaxed)); });
}

bool DeadLetters::IsNotice(EventType type, UndeliveredReason reason) {
  return reason == UndeliveredReason::kActorNotFound &&
         (InEventSpace(type, kSystemEventSpace) || InEventSpace(type, kInterconnectEventSpace));
}

std::atomic<uint64_t>& DeadLetters::Counter(Key key, const std::string& name) {
  auto it = counts_.find(key);
  if (it == counts_.end()) {
    if (counts_.size() >= kMaxKeys - 1 && key.first != 0) {
      return Counter({0, key.second}, "other");
    }
    auto [named, fresh] = labels_.try_emplace(key.first, name);
    if (fresh) {
      // Two types whose classes share a name (in different namespaces) keep apart by number.
      for (const auto& [other, label] : labels_) {
        if (other != key.first && label == name) {
          named->second = absl::StrFormat("%s(0x%08x)", name, key.first);
          break;
        }
      }
    }
    const std::string label = named->second;
    it = counts_.emplace(key, std::make_unique<std::atomic<uint64_t>>(0)).first;
    const std::atomic<uint64_t>* count = it->second.get();
    registrations_.push_back(metrics_->Add(
        {"troupe_dead_letters_total",
         MetricType::kCounter,
         "Events that could not be delivered and that nobody tracked, by event type (its class's "
         "name, or its number when no class names it) and reason (type \"other\" once 64 pairs "
         "are counted).",
         {{"type", label}, {"reason", UndeliveredReasonName(key.second)}}},
        [count] { return static_cast<int64_t>(count->load(std::memory_order_relaxed)); }));
  }
  return *it->second;
}

std::vector<ActorId> DeadLetters::Record(const EventHandle& ev, UndeliveredReason reason,
                                         absl::Time now) {
  // Named outside the lock: the event's own class when the handle holds the event, else the
  // classes declared for its number (bytes from another node).
  const std::string name = ev.HasEvent() ? ev.GetBase()->TypeName() : EventTypeName(ev.type());
  troupe::MutexLock lock(&mu_);
  Counter({ev.type(), reason}, name).fetch_add(1, std::memory_order_relaxed);
  if (now - window_start_ >= absl::Seconds(1)) {
    window_start_ = now;
    logged_in_window_ = 0;
  }
  if (logged_in_window_ < log_per_second_) {
    ++logged_in_window_;
    TROUPE_LOG(kInfo, kActors) << absl::StrFormat(
        "dead letter (%s): event %s (0x%08x) from %s to %s cookie %u%s",
        UndeliveredReasonName(reason), name, ev.type(), ev.sender().ToString(),
        ev.recipient().ToString(), ev.cookie(),
        not_logged_ == 0
            ? ""
            : absl::StrFormat("; %u earlier dead letters were not logged (over %d a second)",
                              not_logged_, log_per_second_));
    not_logged_ = 0;
  } else {
    ++not_logged_;
  }
  return listeners_;
}

void DeadLetters::Subscribe(const ActorId& listener) {
  troupe::MutexLock lock(&mu_);
  if (std::find(listeners_.begin(), listeners_.end(), listener) == listeners_.end()) {
    listeners_.push_back(listener);
  }
}

void DeadLetters::Unsubscribe(const ActorId& listener) {
  troupe::MutexLock lock(&mu_);
  listeners_.erase(std::remove(listeners_.begin(), listeners_.end(), listener), listeners_.end());
}

std::vector<DeadLetterCount> DeadLetters::Counts() const {
  troupe::MutexLock lock(&mu_);
  std::vector<DeadLetterCount> counts;
  counts.reserve(counts_.size());
  for (const auto& [key, count] : counts_) {
    counts.push_back({key.first, key.second, count->load(std::memory_order_relaxed)});
  }
  std::sort(counts.begin(), counts.end(), [](const DeadLetterCount& a, const DeadLetterCount& b) {
    return a.type != b.type ? a.type < b.type : a.reason < b.reason;
  });
  return counts;
}

}  // namespace troupe::internal
