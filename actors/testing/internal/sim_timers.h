// SPDX-License-Identifier: Apache-2.0
//
// SimTimers: the delayed sends of every node of a TestRuntime, in simulated time.
//
// Timers are ordered by (due time, sequence number): two timers due at the same instant fire in
// the order they were set, so the order never depends on the generator or on addresses. Each
// remembers the incarnation of the node that set it: a timer of a node that died (or died and
// restarted) since never fires. The stepper pops due timers as it moves the clock; cancelled
// timers are dropped before it looks for the next due time, so the clock never jumps to them.
// Private to troupe::testing; not installed.
//
// Thread-safety: thread-compatible; the test runtime uses it from the test's thread only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <utility>

#include "absl/time/time.h"

#include "actors/actor_id.h"
#include "actors/event.h"
#include "actors/timer.h"

namespace troupe::testing {

class SimTimers {
 public:
  struct Timer {
    NodeId node;
    uint32_t incarnation;
    EventHandlePtr ev;
    TimerCookie cookie;
    // Observers saw it already (a Delay verdict): deliver without asking them again.
    bool observed;
  };

  // Sets a timer that delivers `ev` on `node` (incarnation `incarnation`) at `due`; the cookie
  // cancels it.
  TimerCookie Add(absl::Time due, NodeId node, uint32_t incarnation, EventHandlePtr ev,
                  bool observed);
  // Cancels and frees every timer of `node`.
  void DropNode(NodeId node);
  // Frees every timer.
  void Clear() { timers_.clear(); }

  // Returns the due time of the earliest timer not cancelled, dropping cancelled ones before it.
  std::optional<absl::Time> NextDue();
  // Removes and returns the earliest timer if it is due by `now` (cancelled or not).
  std::optional<Timer> PopDue(absl::Time now);

  // Returns the number of `node`'s timers not yet popped, cancelled ones included.
  size_t CountOn(NodeId node) const;
  // Returns the number of timers neither fired nor cancelled.
  size_t Pending() const;

 private:
  std::map<std::pair<absl::Time, uint64_t>, Timer> timers_;
  uint64_t sequence_ = 0;
};

}  // namespace troupe::testing
