// SPDX-License-Identifier: Apache-2.0
//
// What a TestRuntime records of the steps it takes, and what it checks them against.
//
// TraceLog keeps the most recent steps for failure messages (Describe) and folds every step into
// a fingerprint with a hash that is stable across processes and builds, so two runs can be
// compared by one number. Watch is the pending Expect: it judges the next event handled by one
// recipient, before its handler runs. Private to troupe::testing; not installed.
//
// Thread-safety: thread-compatible; the test runtime uses both from the test's thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <optional>
#include <string>

#include "actors/actor_id.h"
#include "actors/actor_system.h"
#include "actors/event.h"
#include "actors/testing/test_runtime.h"

namespace troupe::testing {

class TraceLog {
 public:
  // Folds `entry` into the fingerprint and keeps it among the last `capacity` entries.
  void Record(const TraceEntry& entry, size_t capacity);

  const std::deque<TraceEntry>& entries() const { return entries_; }
  uint64_t fingerprint() const { return fingerprint_; }
  // Appends the last `count` entries to `out`, one per line.
  void AppendTail(std::string* out, size_t count) const;

 private:
  std::deque<TraceEntry> entries_;
  uint64_t fingerprint_ = 0;
};

// A pending Expect: the next event handled by `recipient`.
struct Watch {
  ActorId recipient;
  EventType type;
  std::optional<ActorId> from;
  const std::function<bool(EventHandle&)>* check;
  bool done = false;
  bool matched = false;
  std::string seen = {};

  // Judges `ev`, about to be handled on `node` (run by `system`), if it is the recipient's next
  // event: sets `done`, and `matched` or `seen`.
  void Observe(NodeId node, const ActorSystem& system, EventHandle& ev);
};

}  // namespace troupe::testing
