// SPDX-License-Identifier: Apache-2.0
//
// Mutex, MutexLock and Notification: abseil's primitives, visible to ThreadSanitizer.
//
// Debian ships abseil without ThreadSanitizer instrumentation, so TSan cannot see the
// happens-before edges that absl::Mutex and absl::Notification create and reports false races on
// the data they protect. These wrappers add the edges explicitly in TSan builds (acquire after
// taking, release before giving up) and cost nothing otherwise. Use them instead of the absl types
// in Troupe code, tests and benchmarks; the Clang thread-safety annotations work the same way.
//
// Thread-safety: thread-safe.
//
// Example:
//
//   troupe::Mutex mu;
//   int value ABSL_GUARDED_BY(mu) = 0;
//   { troupe::MutexLock lock(&mu); ++value; }
//
//   troupe::Notification done;
//   std::thread worker([&] { ...; done.Notify(); });
//   if (!done.WaitForNotificationWithTimeout(absl::Seconds(10))) { /* timed out */ }
#pragma once

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

// An exclusive lock (absl::Mutex underneath).
class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  explicit constexpr Mutex(absl::ConstInitType tag) : mu_(tag) {}
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    mu_.Lock();
    internal::TsanAcquire(this);
  }
  void Unlock() ABSL_UNLOCK_FUNCTION() {
    internal::TsanRelease(this);
    mu_.Unlock();
  }
  // Releases the lock until `condition` holds (evaluated with the lock held), then retakes it.
  void Await(const absl::Condition& condition) ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    const AnnotatedCondition annotated{this, &condition};
    internal::TsanRelease(this);
    mu_.Await(absl::Condition(&annotated));
    internal::TsanAcquire(this);
  }
  // As Await, but gives up at `deadline`; returns whether `condition` holds.
  bool AwaitWithDeadline(const absl::Condition& condition, absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    const AnnotatedCondition annotated{this, &condition};
    internal::TsanRelease(this);
    const bool result = mu_.AwaitWithDeadline(absl::Condition(&annotated), deadline);
    internal::TsanAcquire(this);
    return result;
  }

 private:
  // absl evaluates a waiter's condition inside its own (uninstrumented) lock code, on whichever
  // thread holds the lock: give TSan the edge from the last unlock before reading guarded state.
  struct AnnotatedCondition {
    const Mutex* mu;
    const absl::Condition* condition;
    bool operator()() const {
      internal::TsanAcquire(mu);
      return condition->Eval();
    }
  };

  absl::Mutex mu_;
};

// Holds a Mutex for its scope.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// A one-shot event: Notify once, wait any number of times (absl::Notification underneath).
class Notification {
 public:
  Notification() = default;
  Notification(const Notification&) = delete;
  Notification& operator=(const Notification&) = delete;

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
