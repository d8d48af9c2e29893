// SPDX-License-Identifier: Apache-2.0
//
// OpenLoopSchedule: the intended send times of an open-loop (fixed-rate) load, as wrk2 keeps
// them. Event i (from 0) is due at start + i / rate, whatever the acknowledgements do; the events
// of the schedule are those due before its end, rate x (end - start) of them (exactly
// rate x seconds for whole seconds). A sender asks how many events are due now and sends them all
// (catching up after a stall of its own or of the system), and measures each event's latency from
// its intended time, not from when it was really sent: a stall then counts in the latency of
// every event it delayed, instead of delaying the sends that would have measured it (coordinated
// omission, which a closed loop suffers).
//
// When the sender's window is full an event stays due: it is sent once an acknowledgement frees
// a slot, its latency still counting from its intended time, so it grows while it waits. No event
// is skipped: an event still unsent when the sender gives up (troupe_loadgen: 5 s after the end)
// is counted unsent.
//
// Time is passed in (nanoseconds on any clock the caller keeps): the schedule reads no clock.
//
// Thread-safety: thread-compatible (one per LoadSender, actor-confined).
//
// Example:
//
//   OpenLoopSchedule schedule(now_ns, /*rate_per_s=*/10000, now_ns + 5'000'000'000);
//   while (schedule.Due(absl::GetCurrentTimeNanos()) > 0 && window_free) {
//     const uint64_t index = schedule.Take();   // send event `index`
//   }
//   // later, its acknowledgement: latency = schedule.LatencyNs(index, ack_ns)
#pragma once

#include <cstdint>

namespace troupe::examples {

class OpenLoopSchedule {
 public:
  // The highest rate a schedule keeps (a larger one is clamped to it).
  static constexpr uint64_t kMaxRate = 1'000'000'000;

  // A schedule of `rate_per_s` (1 to kMaxRate) events per second from `start_ns` to `end_ns`
  // (exclusive).
  OpenLoopSchedule(int64_t start_ns, uint64_t rate_per_s, int64_t end_ns);

  // Returns the intended send time of event `index`: start + index / rate, rounded down to the
  // nanosecond, without drift over any number of events.
  int64_t IntendedNs(uint64_t index) const;
  // Returns how many events are due at `now_ns` and not taken yet (all the late ones at once
  // after a stall).
  uint64_t Due(int64_t now_ns) const;
  // Takes the next event and returns its index. Precondition: taken() < total().
  uint64_t Take();
  // Returns how long after `now_ns` the next event is due: 0 when one is due now, -1 when the
  // schedule is finished.
  int64_t UntilNextNs(int64_t now_ns) const;
  // Returns the latency of event `index` answered at `answered_ns`: from its intended time,
  // 0 when the answer came earlier.
  uint64_t LatencyNs(uint64_t index, int64_t answered_ns) const;

  // Returns the events of the schedule, and those taken.
  uint64_t total() const { return total_; }
  uint64_t taken() const { return taken_; }
  bool finished() const { return taken_ >= total_; }

 private:
  int64_t start_ns_;
  uint64_t rate_;
  uint64_t total_;
  uint64_t taken_ = 0;
};

}  // namespace troupe::examples
