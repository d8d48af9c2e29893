// SPDX-License-Identifier: Apache-2.0
//
// Mutex, MutexLock and Notification: locking primitives that ThreadSanitizer can see.
//
// Debian ships abseil without ThreadSanitizer instrumentation, so TSan cannot see the
// happens-before edges that absl::Mutex and absl::Notification create and reports false races on
// the data they protect. Mutex is built on std::mutex (pthread, intercepted by TSan);
// Notification wraps absl::Notification and adds the edges explicitly in TSan builds. Use these
// instead of the absl types in Troupe code, tests and benchmarks; the Clang thread-safety
// annotations work the same way.
//
// Thread-safety: thread-safe.
//
// Example:
//
//   struct Tally {
//     troupe::Mutex mu;
//     int value ABSL_GUARDED_BY(mu) = 0;
//   } tally;
//   { troupe::MutexLock lock(&tally.mu); ++tally.value; }
//
//   troupe::Notification done;
//   std::thread worker([&] { /* the work */ done.Notify(); });
//   if (!done.WaitForNotificationWithTimeout(absl::Seconds(10))) { /* timed out */ }
//   worker.join();
#pragma once

#include <condition_variable>
#include <mutex>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"

#if defined(__SANITIZE_THREAD__)
#define TROUPE_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TROUPE_TSAN 1
#endif
#endif

#ifdef TROUPE_TSAN
extern "C" {
void __tsan_acquire(void* addr);  // NOLINT(bugprone-reserved-identifier)
void __tsan_release(void* addr);  // NOLINT(bugprone-reserved-identifier)
}
#endif

namespace troupe {
namespace internal {

inline void TsanAcquire([[maybe_unused]] const void* addr) {
#ifdef TROUPE_TSAN
  __tsan_acquire(const_cast<void*>(addr));
#endif
}

inline void TsanRelease([[maybe_unused]] const void* addr) {
#ifdef TROUPE_TSAN
  __tsan_release(const_cast<void*>(addr));
#endif
}

}  // namespace internal

// An exclusive lock with absl-style conditions, over std::mutex.
//
// Not absl::Mutex: Debian builds abseil without NDEBUG, which leaves the mutex deadlock detector on
// and makes an uncontended Lock/Unlock cost 77 ns here (31 ns with detection switched off) against
// 9 ns for std::mutex, and the ready queue and mailbox table take a lock per activation. pthread
// mutexes are also intercepted by ThreadSanitizer, so no annotation is needed.
class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  ~Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;
  Mutex(Mutex&&) = delete;
  Mutex& operator=(Mutex&&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() {
    // Notified under the lock: a waiter that times out may destroy the mutex as soon as it can
    // take the lock, so nothing may touch cv_ after the unlock.
    if (waiters_ != 0) {
      cv_.notify_all();
    }
    mu_.unlock();
  }
  // Releases the lock until `condition` holds (evaluated with the lock held), then retakes it.
  void Await(const absl::Condition& condition) ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    std::unique_lock<std::mutex> lock(mu_, std::adopt_lock);
    ++waiters_;
    while (!condition.Eval()) {
      cv_.wait(lock);
    }
    --waiters_;
    lock.release();
  }
  // As Await, but gives up at `deadline`; returns whether `condition` holds.
  bool AwaitWithDeadline(const absl::Condition& condition, absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    std::unique_lock<std::mutex> lock(mu_, std::adopt_lock);
    ++waiters_;
    const auto until = absl::ToChronoTime(deadline);
    bool holds = condition.Eval();
    while (!holds) {
      if (cv_.wait_until(lock, until) == std::cv_status::timeout) {
        holds = condition.Eval();
        break;
      }
      holds = condition.Eval();
    }
    --waiters_;
    lock.release();
    return holds;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  // Threads inside Await; written and read with mu_ held.
  int waiters_ = 0;
};

// Holds a Mutex for its scope.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;
  MutexLock(MutexLock&&) = delete;
  MutexLock& operator=(MutexLock&&) = delete;

 private:
  Mutex* const mu_;
};

// A one-shot event: Notify once, wait any number of times (absl::Notification underneath).
class Notification {
 public:
  Notification() = default;
  ~Notification() = default;
  Notification(const Notification&) = delete;
  Notification& operator=(const Notification&) = delete;
  Notification(Notification&&) = delete;
  Notification& operator=(Notification&&) = delete;

  // Wakes every waiter; must be called at most once.
  void Notify() {
    internal::TsanRelease(this);
    n_.Notify();
  }
  bool HasBeenNotified() const {
    const bool notified = n_.HasBeenNotified();
    if (notified) {
      internal::TsanAcquire(this);
    }
    return notified;
  }
  void WaitForNotification() const {
    n_.WaitForNotification();
    internal::TsanAcquire(this);
  }
  // Returns true when notified within `timeout`.
  bool WaitForNotificationWithTimeout(absl::Duration timeout) const {
    const bool notified = n_.WaitForNotificationWithTimeout(timeout);
    if (notified) {
      internal::TsanAcquire(this);
    }
    return notified;
  }

 private:
  absl::Notification n_;
};

}  // namespace troupe
