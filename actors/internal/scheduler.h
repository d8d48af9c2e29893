// SPDX-License-Identifier: Apache-2.0
//
// The scheduler thread: delivers delayed events through the runtime's normal send path.
//
// Timers sit in a min-heap ordered by (deadline, sequence). The thread sleeps until the earliest
// deadline rounded up to the configured resolution, so an event fires at most one resolution late
// and never early. Cancelled timers stay in the heap until due and are then dropped (cancelling is
// one CAS for the caller).
//
// Thread-safety: thread-safe.
#pragma once

#include <cstdint>
#include <queue>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"

#include "actors/event.h"
#include "actors/sync.h"
#include "actors/timer.h"

namespace troupe::internal {

class Runtime;

class Scheduler {
 public:
  Scheduler(Runtime* runtime, absl::Duration resolution);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;
  Scheduler(Scheduler&&) = delete;
  Scheduler& operator=(Scheduler&&) = delete;

  void Start();
  // Stops the thread and frees every pending event (they are not delivered).
  void Stop();

  // Delivers `handle` after `delay` unless the returned cookie is cancelled first. After Stop the
  // handle is freed at once and the cookie reports not pending.
  TimerCookie Schedule(absl::Duration delay, EventHandlePtr handle);

  // Returns the number of timers waiting (cancelled ones included until due).
  size_t PendingCount() const;

 private:
  struct Timer {
    absl::Time deadline;
    uint64_t sequence;
    EventHandle* handle;
    TimerCookie cookie;
  };
  struct Later {
    bool operator()(const Timer& a, const Timer& b) const {
      return a.deadline != b.deadline ? a.deadline > b.deadline : a.sequence > b.sequence;
    }
  };

  void Loop();

  Runtime* const runtime_;
  const absl::Duration resolution_;
  mutable troupe::Mutex mu_;
  std::priority_queue<Timer, std::vector<Timer>, Later> timers_ ABSL_GUARDED_BY(mu_);
  uint64_t next_sequence_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // When the thread plans to wake next; a timer due earlier sets rearm_ to wake it now.
  absl::Time wake_at_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  bool rearm_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace troupe::internal
