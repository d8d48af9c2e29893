// SPDX-License-Identifier: Apache-2.0
#include "actors/internal/executor_pool.h"

#include <pthread.h>

#include <chrono>

#include "absl/strings/str_cat.h"

#include "actors/internal/cpu_relax.h"
#include "actors/internal/runtime.h"

namespace troupe::internal {
namespace {

thread_local WorkerContext* tls_worker = nullptr;

// Adds to a counter only the owning worker writes; relaxed load+store (no read-modify-write), the
// atomic only makes concurrent reads by Stats() well-defined.
inline void AddOwned(std::atomic<uint64_t>& counter, uint64_t n) {
  counter.store(counter.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

// xorshift64: plenty for picking places and budgets; `state` must not be zero.
inline uint64_t NextRandom(uint64_t& state) {
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return state;
}

inline uint64_t NonZeroSeed(uint64_t seed) { return seed == 0 ? 0x9e3779b97f4a7c15ULL : seed; }

}  // namespace

WorkerContext* CurrentWorker() { return tls_worker; }

ExecutorPool::ExecutorPool(Runtime* runtime, uint32_t index, PoolSettings settings)
    : runtime_(runtime),
      index_(index),
      settings_(std::move(settings)),
      shuffle_state_(NonZeroSeed(settings_.shuffle_seed)) {}

ExecutorPool::~ExecutorPool() { Stop(); }

void ExecutorPool::Start() {
  contexts_.reserve(settings_.threads);
  threads_.reserve(settings_.threads);
  for (uint32_t i = 0; i < settings_.threads; ++i) {
    contexts_.push_back(std::make_unique<WorkerContext>());
    contexts_.back()->pool = this;
    contexts_.back()->shuffle_state = NonZeroSeed(settings_.shuffle_seed + i + 1);
  }
  for (uint32_t i = 0; i < settings_.threads; ++i) {
    threads_.emplace_back([this, i] { WorkerLoop(contexts_[i].get(), i); });
  }
}

void ExecutorPool::Stop() {
  if (threads_.empty()) {
    return;
  }
  stopping_.store(true, std::memory_order_seq_cst);
  wake_.release(static_cast<std::ptrdiff_t>(threads_.size()));
  for (auto& thread : threads_) {
    thread.join();
  }
  threads_.clear();
  // Mailboxes left queued or in run-next slots need nothing here: the runtime frees their events
  // by walking the mailbox table.
}

void ExecutorPool::Schedule(Mailbox* mailbox) {
  if (settings_.shuffle) [[unlikely]] {
    EnqueueShuffled(mailbox);
    WakeOne();
    return;
  }
  WorkerContext* context = tls_worker;
  if (context != nullptr && context->pool == this && context->current != nullptr &&
      !stopping_.load(std::memory_order_relaxed)) {
    Mailbox* displaced = context->run_next;
    context->run_next = mailbox;
    if (displaced == nullptr) {
      return;
    }
    displaced->next_ready = nullptr;
    if (context->deferred_tail == nullptr) {
      context->deferred_head = displaced;
    } else {
      context->deferred_tail->next_ready = displaced;
    }
    context->deferred_tail = displaced;
    if (++context->deferred_count >= kMaxDeferred) {
      FlushDeferred(context);
    }
    return;
  }
  Enqueue(mailbox);
  WakeOne();
}

void ExecutorPool::FlushDeferred(WorkerContext* context) {
  if (context->deferred_head == nullptr) {
    return;
  }
  EnqueueList(context->deferred_head, context->deferred_tail, context->deferred_count);
  context->deferred_head = nullptr;
  context->deferred_tail = nullptr;
  context->deferred_count = 0;
  WakeOne();
}

void ExecutorPool::EnqueueList(Mailbox* first, Mailbox* last, uint32_t count) {
  last->next_ready = nullptr;
  {
    troupe::MutexLock lock(&mu_);
    if (tail_ == nullptr) {
      head_ = first;
    } else {
      tail_->next_ready = first;
    }
    tail_ = last;
  }
  // seq_cst: published before WakeOne reads sleepers_ (pairs with the worker's park sequence).
  queued_.fetch_add(count, std::memory_order_seq_cst);
}

void ExecutorPool::EnqueueShuffled(Mailbox* mailbox) {
  {
    troupe::MutexLock lock(&mu_);
    uint32_t window = 0;
    for (Mailbox* m = head_; m != nullptr && window < kShuffleWindow; m = m->next_ready) {
      ++window;
    }
    const uint64_t place = NextRandom(shuffle_state_) % (window + 1);
    if (place == window) {
      mailbox->next_ready = nullptr;
      if (tail_ == nullptr) {
        head_ = mailbox;
      } else {
        tail_->next_ready = mailbox;
      }
      tail_ = mailbox;
    } else if (place == 0) {
      mailbox->next_ready = head_;
      head_ = mailbox;
    } else {
      Mailbox* before = head_;
      for (uint64_t i = 1; i < place; ++i) {
        before = before->next_ready;
      }
      mailbox->next_ready = before->next_ready;
      before->next_ready = mailbox;
    }
  }
  // seq_cst: as in EnqueueList.
  queued_.fetch_add(1, std::memory_order_seq_cst);
}

Mailbox* ExecutorPool::Dequeue() {
  if (queued_.load(std::memory_order_relaxed) <= 0) {
    return nullptr;
  }
  troupe::MutexLock lock(&mu_);
  Mailbox* mailbox = head_;
  if (mailbox == nullptr) {
    return nullptr;
  }
  head_ = mailbox->next_ready;
  if (head_ == nullptr) {
    tail_ = nullptr;
  }
  queued_.fetch_sub(1, std::memory_order_relaxed);
  return mailbox;
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
  }
}

void ExecutorPool::WorkerLoop(WorkerContext* context, uint32_t worker) {
  tls_worker = context;
  const std::string thread_name = absl::StrCat(settings_.name.substr(0, 9), ":", worker);
  pthread_setname_np(pthread_self(), thread_name.c_str());
  const auto spin = absl::ToChronoNanoseconds(settings_.spin_time);
  uint32_t streak = 0;
  while (true) {
    // Checked before taking work: with actors that keep each other busy the queue never empties,
    // and Stop must still return after one activation per worker.
    if (stopping_.load(std::memory_order_acquire)) {
      break;
    }
    Mailbox* mailbox = nullptr;
    if (context->run_next != nullptr &&
        (streak < kMaxRunNextStreak || queued_.load(std::memory_order_relaxed) <= 0)) {
      mailbox = context->run_next;
      context->run_next = nullptr;
      ++streak;
    } else {
      mailbox = Dequeue();
      if (mailbox != nullptr) {
        streak = 0;
        // A batch publish wakes one worker; each worker that finds more behind what it took wakes
        // the next, so a burst reaches every parked worker without a wake-up per mailbox.
        if (queued_.load(std::memory_order_relaxed) > 0) {
          WakeOne();
        }
        if (context->run_next != nullptr) {
          // The streak ran out: let the slot occupant queue behind what waited.
          Enqueue(context->run_next);
          context->run_next = nullptr;
        }
      } else if (context->run_next != nullptr) {
        mailbox = context->run_next;
        context->run_next = nullptr;
      }
    }
    if (mailbox != nullptr) {
      Run(context, mailbox);
      continue;
    }
    // Spin, then park.
    const auto spin_until = std::chrono::steady_clock::now() + spin;
    bool found = false;
    while (std::chrono::steady_clock::now() < spin_until) {
      if (queued_.load(std::memory_order_relaxed) > 0 ||
          stopping_.load(std::memory_order_relaxed)) {
        found = true;
        break;
      }
      for (int i = 0; i < 16; ++i) {
        CpuRelax();
      }
    }
    if (found) {
      continue;
    }
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    if (queued_.load(std::memory_order_seq_cst) > 0 || stopping_.load(std::memory_order_seq_cst)) {
      if (TryCancelSleep()) {
        continue;
      }
      // A producer already took our sleeper slot and owes us a token: consume it.
    }
    AddOwned(context->parks, 1);
    wake_.acquire();
  }
  tls_worker = nullptr;
}

void ExecutorPool::Run(WorkerContext* context, Mailbox* mailbox) {
  context->current = mailbox;
  AddOwned(context->activations, 1);
  // The clock is first read at the 8th event: most activations handle a few events and never
  // pay for it. The time budget is therefore measured from the 8th event on.
  std::chrono::steady_clock::time_point start;
  const auto max_time = absl::ToChronoNanoseconds(settings_.max_time);
  uint32_t handled = 0;
  uint32_t max_events = settings_.max_events;
  if (settings_.shuffle) [[unlikely]] {
    max_events = 1 + static_cast<uint32_t>(NextRandom(context->shuffle_state) % max_events);
  }
  bool retried = false;
  MailboxNode* cursor = mailbox->cursor();
  while (true) {
    EventHandle* ev = mailbox->Pop(cursor);
    if (ev == nullptr) {
      mailbox->set_cursor(cursor);
      if (mailbox->TryIdle()) {
        break;
      }
      // We own the mailbox again, but between our kIdle store and our CAS another worker may have
      // run it and moved the cursor (it wrote the cursor back before its own kIdle store, which
      // our CAS read): ours is stale.
      cursor = mailbox->cursor();
      if (retried) {
        // A writer is mid-push (exchanged, not yet linked). Yield the thread rather than spin;
        // this worker comes back to it, so nobody needs waking.
        Enqueue(mailbox);
        break;
      }
      retried = true;
      continue;
    }
    retried = false;
    runtime_->Dispatch(mailbox, EventHandlePtr(ev));
    ++handled;
    bool over_time = false;
    if ((handled & 7) == 0) {
      const auto now = std::chrono::steady_clock::now();
      if (handled == 8) {
        start = now;
      } else {
        over_time = now - start >= max_time;
      }
    }
    if (handled >= max_events || over_time) {
      AddOwned(context->budget_preemptions, 1);
      mailbox->set_cursor(cursor);
      // To the back of the queue. No wake-up: this worker dequeues again right away, and waking
      // a parked one only to hand it this mailbox would move a lone busy actor between cores.
      Enqueue(mailbox);
      break;
    }
  }
  FlushDeferred(context);
  AddOwned(context->events, handled);
  context->current = nullptr;
}

PoolStats ExecutorPool::Stats() const {
  PoolStats stats;
  for (const auto& context : contexts_) {
    stats.events += context->events.load(std::memory_order_relaxed);
    stats.activations += context->activations.load(std::memory_order_relaxed);
    stats.budget_preemptions += context->budget_preemptions.load(std::memory_order_relaxed);
    stats.parks += context->parks.load(std::memory_order_relaxed);
  }
  return stats;
}

}  // namespace troupe::internal
