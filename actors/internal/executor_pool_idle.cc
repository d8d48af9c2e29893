// SPDX-License-Identifier: Apache-2.0
//
// ExecutorPool's idle side: stealing (local queues and run-next slots), wake-ups, spinning and
// parking. The protocols are in executor_pool.h's file comment.
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#include "absl/time/time.h"

#include "actors/internal/executor_pool.h"
#include "actors/internal/small_alloc.h"

namespace troupe::internal {
namespace {

int Membarrier(int command) {
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-vararg): the system call has no libc wrapper.
  return static_cast<int>(::syscall(__NR_membarrier, command, 0, 0));
}

}  // namespace

bool RegisterAsymmetricBarrier() {
  // Once per process; the kernel keeps the registration for every thread, later ones included.
  static const bool registered = Membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
  return registered;
}

bool AsymmetricHeavyBarrier() { return Membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0; }

Mailbox* ExecutorPool::Steal(WorkerContext* context) {
  const auto workers = static_cast<uint32_t>(contexts_.size());
  if (workers < 2) {
    return nullptr;
  }
  const auto start = static_cast<uint32_t>(NextRandom(context->random_state) % workers);
  for (uint32_t i = 0; i < workers; ++i) {
    WorkerContext* victim = contexts_[(start + i) % workers].get();
    if (victim == context) {
      continue;
    }
    const uint32_t n = victim->local.StealHalfInto(&context->local);
    if (n == 0) {
      continue;
    }
    AddOwned<uint64_t>(context->steals, n);
    if (n > 1 && sleepers_.load(std::memory_order_relaxed) > 0) {
      WakeOne();  // more than we can run at once: let the next idle worker steal from us
    }
    return context->local.Pop();
  }
  // Only a slot is left: one whose owner has been inside a handler for kRunNextHoldNs.
  WorkerContext* victim = HeldRunNext(context, SteadyNanos());
  if (victim == nullptr) {
    return nullptr;
  }
  Mailbox* mailbox = StealRunNext(victim, context->run_next_looks[victim->index].sequence);
  if (mailbox != nullptr) {
    AddOwned<uint64_t>(context->steals, 1);
  }
  return mailbox;
}

Mailbox* ExecutorPool::StealRunNext(WorkerContext* victim, uint64_t sequence) {
  bool idle = false;
  // seq_cst: the store the owner's load of `stealing` must see (executor_pool.h's handshake).
  if (!victim->stealing.compare_exchange_strong(idle, true, std::memory_order_seq_cst)) {
    return nullptr;  // another thief is at it
  }
  Mailbox* mailbox = nullptr;
  // After the barrier, either we see the owner's End (the sequence moved: it may be taking the
  // slot) or the owner will see `stealing` when it gets to its slot.
  if (!AsymmetricHeavyBarrier()) {
    // Refused (a sandbox changed its mind?): stop looking at slots rather than spin on them.
    steal_run_next_.store(false, std::memory_order_relaxed);
    watcher_.store(true, std::memory_order_relaxed);
  } else if (victim->trace.sequence.load(std::memory_order_relaxed) == sequence) {
    mailbox = victim->run_next.load(std::memory_order_relaxed);
    // acquire: pairs with the owner's release store (or exchange) of the mailbox into the slot.
    // The owner's Schedule may displace it meanwhile (its exchange then gets null or ours fails).
    if (mailbox != nullptr &&
        !victim->run_next.compare_exchange_strong(mailbox, nullptr, std::memory_order_acquire,
                                                  std::memory_order_relaxed)) {
      mailbox = nullptr;
    }
  }
  // release: the owner waiting in TakeRunNextContended sees our verdict on the slot.
  victim->stealing.store(false, std::memory_order_release);
  return mailbox;
}

Mailbox* ExecutorPool::TakeRunNextContended(WorkerContext* context) {
  // acquire: pairs with the thief's release, so the slot below is as the thief left it.
  while (context->stealing.load(std::memory_order_acquire)) {
    std::this_thread::yield();
  }
  return context->run_next.exchange(nullptr, std::memory_order_relaxed);
}

WorkerContext* ExecutorPool::HeldRunNext(WorkerContext* context, int64_t now) {
  if (!steal_run_next_.load(std::memory_order_relaxed)) {
    return nullptr;
  }
  for (const auto& other : contexts_) {
    WorkerContext* victim = other.get();
    if (victim == context) {
      continue;
    }
    // relaxed: a stale sequence only moves the steal a little (the CAS decides who runs it).
    const uint64_t sequence = victim->trace.sequence.load(std::memory_order_relaxed);
    WorkerContext::RunNextLook& look = context->run_next_looks[victim->index];
    if (look.sequence != sequence) {
      look = {sequence, now};
      continue;
    }
    // Odd: inside a handler (between two, the owner may be taking the slot at any moment).
    if ((sequence & 1) != 0 && now - look.since_ns >= kRunNextHoldNs &&
        victim->run_next.load(std::memory_order_relaxed) != nullptr) {
      return victim;
    }
  }
  return nullptr;
}

bool ExecutorPool::AnyOtherBusy(const WorkerContext* context) const {
  for (const auto& other : contexts_) {
    if (other.get() != context && other->idle_since_ns.load(std::memory_order_relaxed) == 0) {
      return true;
    }
  }
  return false;
}

bool ExecutorPool::KeepWatch(const WorkerContext* context, bool watching) {
  if (!steal_run_next_.load(std::memory_order_relaxed)) {
    return false;
  }
  // Our caller's seq_cst sleeper registration orders these loads after it (and after a busy
  // worker's Idle-exit fence, or that worker sees us in sleepers_).
  if (AnyOtherBusy(context)) {
    return watching || !watcher_.exchange(true, std::memory_order_seq_cst);
  }
  if (!watching) {
    return false;
  }
  // Nobody is busy: give the role up. A worker that became busy just now may have read watcher_
  // before this store (and so woken nobody): after the fence, either we see it busy or it sees
  // false (it clears idle_since_ns and fences before it runs a handler; see Idle).
  watcher_.store(false, std::memory_order_seq_cst);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  return AnyOtherBusy(context) && !watcher_.exchange(true, std::memory_order_seq_cst);
}

bool ExecutorPool::HasWork(const WorkerContext* context) const {
  if (queued_.load(std::memory_order_seq_cst) > 0) {
    return true;
  }
  for (const auto& other : contexts_) {
    if (other.get() != context && other->local.Size() > 0) {
      return true;
    }
  }
  return false;
}

bool ExecutorPool::TryCancelSleep() {
  int32_t sleepers = sleepers_.load(std::memory_order_seq_cst);
  while (sleepers > 0) {
    if (sleepers_.compare_exchange_weak(sleepers, sleepers - 1, std::memory_order_seq_cst)) {
      return true;
    }
  }
  return false;
}

void ExecutorPool::WakeOne() {
  // Each successful decrement owes exactly one semaphore token to a parked (or parking) worker.
  if (sleepers_.load(std::memory_order_seq_cst) > 0 && TryCancelSleep()) {
    wake_.release();
    return;
  }
  // No sleeper on the semaphore: a worker may be waiting in the poller.
  if (poller_waiting_.load(std::memory_order_seq_cst)) {
    InterruptPoller();
  }
}

void ExecutorPool::Kick(uint32_t worker) {
  if (worker < contexts_.size() &&
      (contexts_[worker]->local.Size() > 0 ||
       contexts_[worker]->run_next.load(std::memory_order_relaxed) != nullptr)) {
    WakeOne();
  }
}

void ExecutorPool::Idle(WorkerContext* context) {
  const int64_t idle_start = SteadyNanos();
  context->idle_since_ns.store(idle_start, std::memory_order_relaxed);
  const int64_t spin_until = idle_start + spin_ns_;
  bool found = false;
  int64_t now = idle_start;
  while (now < spin_until) {
    if (HasWork(context) || HeldRunNext(context, now) != nullptr ||
        stopping_.load(std::memory_order_relaxed)) {
      found = true;
      break;
    }
    if (poller_.load(std::memory_order_relaxed) != nullptr && PollIo(context)) {
      found = true;
      break;
    }
    // Yield rather than pause: on a machine with fewer cores than busy threads (two vCPUs,
    // several pools, two nodes), a spinning worker must not hold a core that a thread with work
    // is waiting for (measured: a remote round trip through the IC pools took 270 µs with pause
    // and 45 µs with yield, bench/README.md). With a core to spare, yield returns at once.
    std::this_thread::yield();
    now = SteadyNanos();
  }
  // What a burst left in the event pool goes back to the system while there is nothing to run.
  while (!found && SmallAllocTrimStep()) {
    found = HasWork(context) || stopping_.load(std::memory_order_relaxed);
  }
  if (!found) {
    // A pool with an I/O poller parks one worker in it (when none is there yet) rather than on
    // the semaphore.
    if (!ParkInPoller(context)) {
      SemaphorePark(context);
    }
    now = SteadyNanos();
  }
  context->idle_since_ns.store(0, std::memory_order_relaxed);
  // Busy from here on. seq_cst fence: a watcher giving up its role sees this store, or our later
  // look at watcher_ (WatchRunNext) sees it gone (executor_pool.h, run-next stealing). One fence
  // per idle period, never per activation.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  AddOwned<int64_t>(context->idle_ns, now - idle_start);
}

void ExecutorPool::SemaphorePark(WorkerContext* context) {
  bool watching = false;
  while (true) {
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    if ((HasWork(context) || stopping_.load(std::memory_order_seq_cst)) && TryCancelSleep()) {
      break;  // work arrived while we registered: run it instead of parking
    }
    // Either nothing is there, or a producer already took our sleeper slot and owes us a token:
    // consume it. With event-pool memory to give back, wake up when that is due (Idle trims), and
    // as the watcher every kWatchPeriodNs, if nothing else wakes us first.
    watching = KeepWatch(context, watching);
    const int64_t trim_in_ns = SmallAllocTrimDelayNanos();
    int64_t wait_ns = -1;
    if (trim_in_ns >= 0) {
      wait_ns = std::max<int64_t>(trim_in_ns, absl::ToInt64Nanoseconds(absl::Milliseconds(1)));
    }
    if (watching && (wait_ns < 0 || wait_ns > kWatchPeriodNs)) {
      wait_ns = kWatchPeriodNs;
    }
    bool timed_out = false;
    Parked(context, [this, wait_ns, &timed_out] {
      if (wait_ns >= 0) {
        if (wake_.try_acquire_for(std::chrono::nanoseconds(wait_ns))) {
          return;  // woken
        }
        if (TryCancelSleep()) {
          timed_out = true;  // with our sleeper slot given up
          return;
        }
        // A waker took our sleeper slot after the timeout: its token is on the way.
      }
      wake_.acquire();
    });
    // Woken to run something, or the trim is due (back to Idle, which trims): a watcher gives its
    // role up and looks again when it next idles.
    if (!timed_out || !watching || (trim_in_ns >= 0 && trim_in_ns <= wait_ns) ||
        HeldRunNext(context, SteadyNanos()) != nullptr) {
      break;
    }
  }
  if (watching) {
    watcher_.store(false, std::memory_order_seq_cst);
  }
}

}  // namespace troupe::internal
