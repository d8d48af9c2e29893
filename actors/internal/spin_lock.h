// SPDX-License-Identifier: Apache-2.0
//
// SpinLock: an exclusive lock for critical sections of a few instructions that are rarely
// contended, such as a parent's list of children, which every spawn and every end of a child
// touches. Uncontended, Lock and Unlock are one atomic exchange and one store (the pthread mutex
// pairs they replaced cost about 140 instructions per child in skynet, 6 % of all it runs);
// a waiter spins with the CPU's pause hint and yields its thread after kSpinsBeforeYield tries,
// so a holder that was preempted gets the core back. It has no conditions and no fairness: use
// troupe::Mutex (actors/sync.h) anywhere a section may block or run long.
//
// ThreadSanitizer sees the acquire and release of the atomic, so no annotation is needed.
//
// Thread-safety: thread-safe.
//
// Example:
//
//   struct Tally {
//     troupe::internal::SpinLock mu;
//     int value ABSL_GUARDED_BY(mu) = 0;
//   } tally;
//   { troupe::internal::SpinLockHolder hold(&tally.mu); ++tally.value; }
#pragma once

#include <atomic>
#include <cstdint>
#include <thread>

#include "absl/base/thread_annotations.h"

#include "actors/internal/cpu_relax.h"

namespace troupe::internal {

class ABSL_LOCKABLE SpinLock {
 public:
  static constexpr uint32_t kSpinsBeforeYield = 64;

  SpinLock() = default;
  ~SpinLock() = default;
  SpinLock(const SpinLock&) = delete;
  SpinLock& operator=(const SpinLock&) = delete;
  SpinLock(SpinLock&&) = delete;
  SpinLock& operator=(SpinLock&&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    // acquire: what the previous holder wrote before its Unlock is visible here.
    while (locked_.exchange(true, std::memory_order_acquire)) {
      uint32_t spins = 0;
      // Wait on a plain load, so waiters do not bounce the cache line with exchanges.
      while (locked_.load(std::memory_order_relaxed)) {
        if (++spins < kSpinsBeforeYield) {
          CpuRelax();
        } else {
          spins = 0;
          std::this_thread::yield();
        }
      }
    }
  }

  // release: pairs with the acquire of the next Lock.
  void Unlock() ABSL_UNLOCK_FUNCTION() { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};

// Holds a SpinLock for its scope.
class ABSL_SCOPED_LOCKABLE SpinLockHolder {
 public:
  explicit SpinLockHolder(SpinLock* lock) ABSL_EXCLUSIVE_LOCK_FUNCTION(lock) : lock_(lock) {
    lock_->Lock();
  }
  ~SpinLockHolder() ABSL_UNLOCK_FUNCTION() { lock_->Unlock(); }
  SpinLockHolder(const SpinLockHolder&) = delete;
  SpinLockHolder& operator=(const SpinLockHolder&) = delete;
  SpinLockHolder(SpinLockHolder&&) = delete;
  SpinLockHolder& operator=(SpinLockHolder&&) = delete;

 private:
  SpinLock* const lock_;
};

}  // namespace troupe::internal
