// SPDX-License-Identifier: Apache-2.0
#include "actors/testing/internal/sim_timers.h"

namespace troupe::testing {

TimerCookie SimTimers::Add(absl::Time due, NodeId node, uint32_t incarnation, EventHandlePtr ev,
                           bool observed) {
  TimerCookie cookie = TimerCookie::Make();
  timers_.emplace(std::pair{due, sequence_++},
                  Timer{node, incarnation, std::move(ev), cookie, observed});
  return cookie;
}

void SimTimers::DropNode(NodeId node) {
  for (auto it = timers_.begin(); it != timers_.end();) {
    if (it->second.node == node) {
      it->second.cookie.TryFire();  // no longer pending: it never fires
      it = timers_.erase(it);
    } else {
      ++it;
    }
  }
}

std::optional<absl::Time> SimTimers::NextDue() {
  // Cancelled timers are dropped here, so jumps never land on them.
  while (!timers_.empty() && !timers_.begin()->second.cookie.IsPending()) {
    timers_.erase(timers_.begin());
  }
  if (timers_.empty()) {
    return std::nullopt;
  }
  return timers_.begin()->first.first;
}

std::optional<SimTimers::Timer> SimTimers::PopDue(absl::Time now) {
  if (timers_.empty() || timers_.begin()->first.first > now) {
    return std::nullopt;
  }
  return std::move(timers_.extract(timers_.begin()).mapped());
}

size_t SimTimers::CountOn(NodeId node) const {
  size_t count = 0;
  for (const auto& [key, timer] : timers_) {
    count += timer.node == node ? 1 : 0;
  }
  return count;
}

size_t SimTimers::Pending() const {
  size_t pending = 0;
  for (const auto& [key, timer] : timers_) {
    pending += timer.cookie.IsPending() ? 1 : 0;
  }
  return pending;
}

}  // namespace troupe::testing
