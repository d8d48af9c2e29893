// SPDX-License-Identifier: Apache-2.0
//
// TimerCookie: the handle of one delayed send, used to cancel it.
//
// `Cancel()` returns true when it prevented delivery (the event had not fired and now never will);
// false when the event already fired or was cancelled. A default-made cookie refers to nothing.
// Copies refer to the same timer. Dropping every copy does not cancel the timer.
//
// Thread-safety: thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

namespace troupe {

class TimerCookie {
 public:
  TimerCookie() = default;

  // Prevents delivery if the event has not fired yet; returns true when it did.
  bool Cancel() const {
    if (state_ == nullptr) {
      return false;
    }
    uint8_t expected = kPending;
    // acq_rel: pairs with the scheduler's CAS in TryFire; exactly one of the two wins.
    return state_->compare_exchange_strong(expected, kCancelled, std::memory_order_acq_rel);
  }

  // Returns true while the event is waiting to fire.
  bool IsPending() const {
    return state_ != nullptr && state_->load(std::memory_order_acquire) == kPending;
  }

  // -- for the scheduler ------------------------------------------------------------------------

  static TimerCookie Make() {
    TimerCookie cookie;
    cookie.state_ = std::make_shared<std::atomic<uint8_t>>(kPending);
    return cookie;
  }

  // Marks the timer fired; false when it was cancelled first.
  bool TryFire() const {
    if (state_ == nullptr) {
      return true;
    }
    uint8_t expected = kPending;
    return state_->compare_exchange_strong(expected, kFired, std::memory_order_acq_rel);
  }

 private:
  static constexpr uint8_t kPending = 0;
  static constexpr uint8_t kFired = 1;
  static constexpr uint8_t kCancelled = 2;

  std::shared_ptr<std::atomic<uint8_t>> state_;
};

}  // namespace troupe
