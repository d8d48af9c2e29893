// SPDX-License-Identifier: Apache-2.0
#include "open_loop.h"

#include <algorithm>

namespace troupe::examples {

namespace {

constexpr uint64_t kNanosPerSecond = 1'000'000'000;

// The events intended strictly before `elapsed_ns` after the start: ceil(elapsed * rate / 1e9),
// split at whole seconds so that no product overflows (rate <= kMaxRate).
uint64_t EventsBefore(int64_t elapsed_ns, uint64_t rate) {
  if (elapsed_ns <= 0) {
    return 0;
  }
  const auto elapsed = static_cast<uint64_t>(elapsed_ns);
  const uint64_t whole = elapsed / kNanosPerSecond;
  const uint64_t part = elapsed % kNanosPerSecond;
  return whole * rate + (part * rate + kNanosPerSecond - 1) / kNanosPerSecond;
}

}  // namespace

OpenLoopSchedule::OpenLoopSchedule(int64_t start_ns, uint64_t rate_per_s, int64_t end_ns)
    : start_ns_(start_ns),
      rate_(std::clamp<uint64_t>(rate_per_s, 1, kMaxRate)),
      total_(EventsBefore(end_ns - start_ns, rate_)) {}

int64_t OpenLoopSchedule::IntendedNs(uint64_t index) const {
  // index / rate seconds: whole seconds, then the rest (below rate, times 1e9: no overflow).
  const uint64_t whole = index / rate_;
  const uint64_t part = index % rate_;
  return start_ns_ + static_cast<int64_t>(whole * kNanosPerSecond + part * kNanosPerSecond / rate_);
}

uint64_t OpenLoopSchedule::Due(int64_t now_ns) const {
  // Event i is due when its intended time is at most now: i <= (now - start) * rate / 1e9.
  const uint64_t due = std::min(total_, EventsBefore(now_ns - start_ns_ + 1, rate_));
  return due > taken_ ? due - taken_ : 0;
}

uint64_t OpenLoopSchedule::Take() { return taken_++; }

int64_t OpenLoopSchedule::UntilNextNs(int64_t now_ns) const {
  if (finished()) {
    return -1;
  }
  return std::max<int64_t>(0, IntendedNs(taken_) - now_ns);
}

uint64_t OpenLoopSchedule::LatencyNs(uint64_t index, int64_t answered_ns) const {
  return static_cast<uint64_t>(std::max<int64_t>(0, answered_ns - IntendedNs(index)));
}

}  // namespace troupe::examples
