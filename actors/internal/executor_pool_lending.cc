// SPDX-License-Identifier: Apache-2.0
//
// ExecutorPool's side of thread lending: resting the workers above the running count, resizing,
// and the busy time the lending rule reads (the rule itself is ThreadLending, thread_lending.h).
#include <algorithm>
#include <atomic>
#include <cstdint>

#include "actors/internal/executor_pool.h"

namespace troupe::internal {

void ExecutorPool::Rest(WorkerContext* context) {
  // What this worker holds goes to the shared queue in one batch, so the running workers run it.
  Mailbox* first = nullptr;
  Mailbox* last = nullptr;
  uint32_t count = 0;
  const auto add = [&](Mailbox* mailbox) {
    if (last == nullptr) {
      first = mailbox;
    } else {
      last->next_ready = mailbox;
    }
    last = mailbox;
    ++count;
  };
  if (Mailbox* held = TakeRunNext(context); held != nullptr) {
    add(held);
  }
  while (Mailbox* mailbox = context->local.Pop()) {
    add(mailbox);
  }
  if (count > 0) {
    EnqueueList(first, last, count);
  }
  const int64_t rest_start = SteadyNanos();
  // Idle while resting: not busy for the run-next watcher (AnyOtherBusy) nor in the busy time.
  context->idle_since_ns.store(rest_start, std::memory_order_relaxed);
  // A wake-up that reached this worker (it was parked when the count dropped) or the work it
  // handed off belongs to a running worker now, and so does the I/O loop if it held it last.
  if (HasWork(context)) {
    WakeOne();
  } else {
    KeepPollerWatched();
  }
  Parked(context, [this, context] {
    // acquire: pairs with Resize's release store; the semaphore orders it before our wake-up.
    while (!stopping_.load(std::memory_order_acquire) &&
           context->index >= running_.load(std::memory_order_acquire)) {
      context->resume.acquire();
    }
  });
  context->idle_since_ns.store(0, std::memory_order_relaxed);
  // Busy again: as when leaving Idle (executor_pool_idle.cc), before any look at watcher_.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  AddOwned<int64_t>(context->idle_ns, SteadyNanos() - rest_start);
}

void ExecutorPool::SetThreads(uint32_t threads) {
  troupe::MutexLock lock(&resize_mu_);
  threads = std::clamp(threads, settings_.min_threads,
                       std::max(settings_.threads, settings_.max_threads));
  const uint32_t now = threads_now_.load(std::memory_order_relaxed);
  if (threads > now) {
    borrowed_.fetch_add(threads - now, std::memory_order_relaxed);
  } else {
    lent_.fetch_add(now - threads, std::memory_order_relaxed);
  }
  threads_now_.store(threads, std::memory_order_relaxed);
  Resize();
}

void ExecutorPool::SetTemporary(bool on) {
  if (settings_.extra_thread_after <= absl::ZeroDuration()) {
    return;
  }
  troupe::MutexLock lock(&resize_mu_);
  if (on && !temporary_.load(std::memory_order_relaxed)) {
    temporaries_.fetch_add(1, std::memory_order_relaxed);
  }
  temporary_.store(on, std::memory_order_relaxed);
  Resize();
}

void ExecutorPool::Resize() {
  const uint32_t before = running_.load(std::memory_order_relaxed);
  const uint32_t after =
      std::min<uint32_t>(threads_now_.load(std::memory_order_relaxed) +
                             (temporary_.load(std::memory_order_relaxed) ? 1 : 0),
                         static_cast<uint32_t>(contexts_.size()));
  // release: a resumed worker that reads the new count (Rest, acquire) runs as one of it.
  running_.store(after, std::memory_order_release);
  for (uint32_t i = before; i < after; ++i) {
    contexts_[i]->resume.release();
  }
}

void ExecutorPool::KeepPollerWatched() {
  if (settings_.min_threads == settings_.threads && settings_.max_threads <= settings_.threads &&
      settings_.extra_thread_after <= absl::ZeroDuration()) {
    return;  // a fixed count: the worker that leaves the loop comes back to it (Idle)
  }
  // Relaxed: a stale look costs one wake-up or waits for the next watchdog tick.
  if (poller_.load(std::memory_order_relaxed) != nullptr &&
      !poller_busy_.load(std::memory_order_relaxed) &&
      sleepers_.load(std::memory_order_relaxed) > 0) {
    WakeOne();
  }
}

int64_t ExecutorPool::BusyNanos() const {
  const int64_t now = SteadyNanos();
  int64_t busy = 0;
  for (const auto& context : contexts_) {
    busy += WorkerBusyNanos(*context, now);
  }
  return busy;
}

}  // namespace troupe::internal
