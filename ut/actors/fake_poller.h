// SPDX-License-Identifier: Apache-2.0
//
// FakePoller: an IoPoller (actors/node_hooks.h) of posted functions for the pool tests
// (io_poller_test.cc, pool_lending_test.cc). Post queues a function as a ready I/O completion
// would be (it does not end a Wait: Interrupt does, as a transport's wake-up would); the loop
// records how many threads are inside it at once.
//
// Thread-safety: thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <utility>

#include "absl/synchronization/mutex.h"

#include "actors/node_hooks.h"
#include "actors/sync.h"

namespace troupe::testutil {

// An I/O loop of posted functions. It records how many threads are inside it at once.
class FakePoller final : public IoPoller {
 public:
  void Post(std::function<void()> fn) {
    troupe::MutexLock lock(&mu_);
    ready_.push_back(std::move(fn));
  }

  size_t Poll() override {
    Enter();
    const size_t ran = RunReady();
    Exit();
    polls_.fetch_add(1, std::memory_order_relaxed);
    return ran;
  }

  void Wait() override {
    Enter();
    {
      troupe::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](FakePoller* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
            return !self->ready_.empty() || self->interrupted_;
          },
          this));
      interrupted_ = false;
    }
    RunReady();
    Exit();
    waits_.fetch_add(1, std::memory_order_relaxed);
  }

  void Interrupt() override {
    troupe::MutexLock lock(&mu_);
    interrupted_ = true;
  }

  int max_inside() const { return max_inside_.load(std::memory_order_acquire); }
  int inside() const { return inside_.load(std::memory_order_acquire); }
  uint64_t waits() const { return waits_.load(std::memory_order_relaxed); }
  uint64_t polls() const { return polls_.load(std::memory_order_relaxed); }

 private:
  void Enter() {
    const int now = inside_.fetch_add(1, std::memory_order_acq_rel) + 1;
    int seen = max_inside_.load(std::memory_order_relaxed);
    while (now > seen && !max_inside_.compare_exchange_weak(seen, now, std::memory_order_acq_rel)) {
    }
  }
  void Exit() { inside_.fetch_sub(1, std::memory_order_acq_rel); }
  size_t RunReady() {
    std::deque<std::function<void()>> batch;
    {
      troupe::MutexLock lock(&mu_);
      batch.swap(ready_);
    }
    for (auto& fn : batch) {
      fn();
    }
    return batch.size();
  }

  troupe::Mutex mu_;
  std::deque<std::function<void()>> ready_ ABSL_GUARDED_BY(mu_);
  bool interrupted_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<int> inside_{0};
  std::atomic<int> max_inside_{0};
  std::atomic<uint64_t> waits_{0};
  std::atomic<uint64_t> polls_{0};
};

}  // namespace troupe::testutil
