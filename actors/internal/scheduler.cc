// SPDX-License-Identifier: Apache-2.0
#include "actors/internal/scheduler.h"

#include <pthread.h>

#include "actors/internal/runtime.h"

namespace troupe::internal {

Scheduler::Scheduler(Runtime* runtime, absl::Duration resolution)
    : runtime_(runtime), resolution_(resolution) {}

Scheduler::~Scheduler() { Stop(); }

void Scheduler::Start() {
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "troupe:sched");
    const LogBinding binding(&runtime_->log_context());
    Loop();
  });
}

void Scheduler::Stop() {
  std::vector<EventHandle*> pending;
  {
    troupe::MutexLock lock(&mu_);
    stopping_ = true;
    while (!timers_.empty()) {
      const Timer& timer = timers_.top();
      timer.cookie.TryFire();  // no longer pending either way
      pending.push_back(timer.handle);
      timers_.pop();
    }
  }
  if (thread_.joinable()) {
    thread_.join();
  }
  for (EventHandle* handle : pending) {
    delete handle;
  }
}

TimerCookie Scheduler::Schedule(absl::Duration delay, EventHandlePtr handle) {
  TimerCookie cookie = TimerCookie::Make();
  const absl::Time deadline = absl::Now() + std::max(delay, absl::ZeroDuration());
  troupe::MutexLock lock(&mu_);
  if (stopping_) {
    cookie.TryFire();
    return cookie;  // `handle` is freed on return
  }
  if (deadline < wake_at_) {
    rearm_ = true;
  }
  timers_.push(Timer{deadline, next_sequence_++, handle.release(), cookie});
  return cookie;
}

size_t Scheduler::PendingCount() const {
  troupe::MutexLock lock(&mu_);
  return timers_.size();
}

void Scheduler::Loop() {
  std::vector<Timer> due;
  while (true) {
    {
      troupe::MutexLock lock(&mu_);
      while (true) {
        if (stopping_) {
          return;
        }
        const absl::Time now = absl::Now();
        if (!timers_.empty() && timers_.top().deadline <= now) {
          break;
        }
        // Sleep until the earliest deadline rounded up to the resolution (several timers then fire
        // in one wake-up), or indefinitely when nothing is pending; Schedule sets `rearm_` when it
        // adds a timer that is due before that.
        wake_at_ = absl::InfiniteFuture();
        if (!timers_.empty()) {
          wake_at_ = absl::UnixEpoch() +
                     absl::Ceil(timers_.top().deadline - absl::UnixEpoch(), resolution_);
        }
        rearm_ = false;
        auto woken = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || rearm_; };
        mu_.AwaitWithDeadline(absl::Condition(&woken), wake_at_);
      }
      const absl::Time now = absl::Now();
      while (!timers_.empty() && timers_.top().deadline <= now) {
        due.push_back(timers_.top());
        timers_.pop();
      }
    }
    for (Timer& timer : due) {
      EventHandlePtr handle(timer.handle);
      if (timer.cookie.TryFire()) {
        runtime_->Send(std::move(handle));
      }
    }
    due.clear();
  }
}

}  // namespace troupe::internal
