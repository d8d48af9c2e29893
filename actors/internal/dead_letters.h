// SPDX-License-Identifier: Apache-2.0
//
// The dead-letter sink: where an event ends that cannot be delivered and that nobody tracks (no
// kTrackDelivery, no forward target). Each one is counted by event type and reason (the metric
// troupe_dead_letters_total{type,reason}), logged at info level with its sender, recipient and type
// (at most `log_per_second` lines a second; the next line says how many were not logged), and
// described to every subscribed listener (EvDeadLetter, actors/events.h).
//
// Thread-safety: thread-safe. Record is called by whichever thread found the event undeliverable.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/time/time.h"

#include "actors/actor_id.h"
#include "actors/event.h"
#include "actors/events.h"
#include "actors/metrics.h"
#include "actors/sync.h"

namespace troupe::internal {

class DeadLetters {
 public:
  // Distinct (type, reason) pairs counted on their own; later pairs count as type "other".
  static constexpr size_t kMaxKeys = 64;

  DeadLetters(MetricsRegistry* metrics, int log_per_second);

  // Counts `ev`, lost for `reason` at `now`, logs it within the rate and returns the listeners to
  // tell (usually none).
  std::vector<ActorId> Record(const EventHandle& ev, UndeliveredReason reason, absl::Time now);
  // Adds `listener` (again: no effect); removes it. A listener that has ended is removed when an
  // EvDeadLetter to it cannot be delivered.
  void Subscribe(const ActorId& listener);
  void Unsubscribe(const ActorId& listener);
  // Returns the counts so far, by type and reason (type 0: the "other" bucket).
  std::vector<DeadLetterCount> Counts() const;

 private:
  using Key = std::pair<EventType, UndeliveredReason>;

  // Returns the counter for `key` (registering its metric on first use).
  std::atomic<uint64_t>& Counter(Key key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  MetricsRegistry* const metrics_;
  const int log_per_second_;
  mutable troupe::Mutex mu_;
  // Values are boxed: metric readers hold their address.
  absl::flat_hash_map<Key, std::unique_ptr<std::atomic<uint64_t>>> counts_ ABSL_GUARDED_BY(mu_);
  std::vector<MetricsRegistry::Registration> registrations_ ABSL_GUARDED_BY(mu_);
  std::vector<ActorId> listeners_ ABSL_GUARDED_BY(mu_);
  // The rate limit: lines logged in the second that began at window_start_, and lines not logged.
  absl::Time window_start_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int logged_in_window_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t not_logged_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace troupe::internal
