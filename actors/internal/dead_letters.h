// SPDX-License-Identifier: Apache-2.0
//
// The dead-letter sink: where an event ends that cannot be delivered and that nobody tracks (no
// kTrackDelivery, no forward target). Each one is counted by event type and reason (the metric
// troupe_dead_letters_total{type,reason}, the type named by its class: EventTypeName), logged at
// info level with its sender, recipient and type (at most `log_per_second` lines a second; the
// next line says how many were not logged), and described to every subscribed listener
// (EvDeadLetter, actors/events.h).
//
// The runtime's own notices to an actor that has ended (IsNotice: a timer's EvWakeup, an
// EvUndelivered, a transport's or a session's event) are no dead letters: the runtime drops
// them, counting them in troupe_dropped_notices_total only (CountNotice).
//
// Thread-safety: thread-safe. Record is called by whichever thread found the event undeliverable.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
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
  // True for an event of the runtime's own (the system and interconnect event spaces) whose
  // recipient has ended or never existed: a notice nobody is left to read, not a dead letter.
  static bool IsNotice(EventType type, UndeliveredReason reason);
  // Counts a notice dropped instead of being recorded.
  void CountNotice() { notices_.fetch_add(1, std::memory_order_relaxed); }
  // Adds `listener` (again: no effect); removes it. A listener that has ended is removed when an
  // EvDeadLetter to it cannot be delivered.
  void Subscribe(const ActorId& listener);
  void Unsubscribe(const ActorId& listener);
  // Returns the counts so far, by type and reason (type 0: the "other" bucket).
  std::vector<DeadLetterCount> Counts() const;

 private:
  using Key = std::pair<EventType, UndeliveredReason>;

  // Returns the counter for `key` (registering its metric on first use, labelled `name`).
  std::atomic<uint64_t>& Counter(Key key, const std::string& name)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  MetricsRegistry* const metrics_;
  const int log_per_second_;
  mutable troupe::Mutex mu_;
  // Values are boxed: metric readers hold their address.
  absl::flat_hash_map<Key, std::unique_ptr<std::atomic<uint64_t>>> counts_ ABSL_GUARDED_BY(mu_);
  // The metric label of each type counted.
  absl::flat_hash_map<EventType, std::string> labels_ ABSL_GUARDED_BY(mu_);
  std::vector<MetricsRegistry::Registration> registrations_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> notices_{0};
  MetricsRegistry::Registration notices_metric_;
  std::vector<ActorId> listeners_ ABSL_GUARDED_BY(mu_);
  // The rate limit: lines logged in the second that began at window_start_, and lines not logged.
  absl::Time window_start_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int logged_in_window_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t not_logged_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace troupe::internal
