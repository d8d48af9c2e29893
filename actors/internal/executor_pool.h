// SPDX-License-Identifier: Apache-2.0
//
// A named pool of worker threads that run ready mailboxes.
//
// Ready queue: an intrusive FIFO of mailboxes under a mutex, plus one "run next" slot per worker:
// a mailbox that a worker's handler activates goes to that worker's slot and runs right after the
// current activation, on the same thread (a ping-pong pair stays on one core). The displaced
// slot occupant joins a per-worker batch that reaches the shared queue in one lock and one
// wake-up when the activation ends (or every kMaxDeferred mailboxes). After kMaxRunNextStreak
// consecutive slot runs a worker takes from the shared queue first, so a pair cannot starve queued
// mailboxes.
//
// Budgets: one activation handles at most `max_events` events and runs at most `max_time`; then
// the mailbox goes to the back of the shared queue.
//
// Shuffle (a debug aid, see proto ShuffleConfig): every activation goes through the shared queue
// at a random place among its first kShuffleWindow entries, and each activation's event budget is
// drawn at random, so ready mailboxes run in an order no code should depend on.
//
// Idle workers spin for `spin_time`, then park on a semaphore and use no CPU. A worker publishes
// itself as a sleeper (seq_cst) before re-checking the queue; a producer publishes work (seq_cst)
// before reading the sleeper count, so a wake-up is never lost. A batch publish wakes one worker;
// a worker that dequeues and still sees work wakes the next (chained wake-up).
//
// Thread-safety: Schedule is thread-safe; Start/Stop are called by the owning runtime only.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <semaphore>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"

#include "actors/internal/mailbox.h"
#include "actors/sync.h"

namespace troupe::internal {

class Runtime;
class ExecutorPool;

struct PoolSettings {
  std::string name;
  uint32_t threads = 1;
  absl::Duration spin_time = absl::Microseconds(20);
  uint32_t max_events = 100;
  absl::Duration max_time = absl::Milliseconds(10);
  // Random ready order (debug aid); the seed makes each pool's choices reproducible on one thread.
  bool shuffle = false;
  uint64_t shuffle_seed = 0;
};

// Counters of one pool, summed over its workers; read without stopping the pool.
struct PoolStats {
  uint64_t events = 0;
  uint64_t activations = 0;
  uint64_t budget_preemptions = 0;
  uint64_t parks = 0;
};

// Per-thread state of the worker running on this thread (null on other threads).
struct WorkerContext {
  ExecutorPool* pool = nullptr;
  Mailbox* run_next = nullptr;
  Mailbox* current = nullptr;
  // Mailboxes this worker activated while its run-next slot was taken, published to the shared
  // queue in one batch (one lock, one wake-up) when the activation ends or the batch fills.
  Mailbox* deferred_head = nullptr;
  Mailbox* deferred_tail = nullptr;
  uint32_t deferred_count = 0;
  // Shuffle mode only: this worker's generator for random budgets (xorshift64, never zero).
  uint64_t shuffle_state = 1;
  // Counters are written by the owning worker only; atomics so readers on other threads are safe.
  std::atomic<uint64_t> events{0};
  std::atomic<uint64_t> activations{0};
  std::atomic<uint64_t> budget_preemptions{0};
  std::atomic<uint64_t> parks{0};
};

// Returns the context of the worker running on the calling thread, or nullptr.
WorkerContext* CurrentWorker();

class ExecutorPool {
 public:
  static constexpr uint32_t kMaxRunNextStreak = 16;
  static constexpr uint32_t kMaxDeferred = 64;
  static constexpr uint32_t kShuffleWindow = 64;

  ExecutorPool(Runtime* runtime, uint32_t index, PoolSettings settings);
  ~ExecutorPool();
  ExecutorPool(const ExecutorPool&) = delete;
  ExecutorPool& operator=(const ExecutorPool&) = delete;
  ExecutorPool(ExecutorPool&&) = delete;
  ExecutorPool& operator=(ExecutorPool&&) = delete;

  // Starts the worker threads.
  void Start();
  // Stops and joins the workers; each finishes its current activation first. Queued mailboxes
  // stay queued (the runtime frees their events).
  void Stop();

  // Makes a mailbox that the caller moved to kScheduled runnable.
  void Schedule(Mailbox* mailbox);

  const PoolSettings& settings() const { return settings_; }
  uint32_t index() const { return index_; }
  PoolStats Stats() const;
  // Returns the number of mailboxes waiting in the shared queue.
  int64_t QueueLength() const { return queued_.load(std::memory_order_relaxed); }

 private:
  void WorkerLoop(WorkerContext* context, uint32_t worker);
  // Runs one activation of `mailbox` within the budget.
  void Run(WorkerContext* context, Mailbox* mailbox);
  void Enqueue(Mailbox* mailbox) {
    if (settings_.shuffle) [[unlikely]] {
      EnqueueShuffled(mailbox);
      return;
    }
    EnqueueList(mailbox, mailbox, 1);
  }
  // Inserts `mailbox` at a random place among the first kShuffleWindow queued ones (or last).
  void EnqueueShuffled(Mailbox* mailbox);
  // Appends the chain first..last (linked through next_ready) of `count` mailboxes.
  void EnqueueList(Mailbox* first, Mailbox* last, uint32_t count);
  void FlushDeferred(WorkerContext* context);
  Mailbox* Dequeue();
  void WakeOne();
  bool TryCancelSleep();

  Runtime* const runtime_;
  const uint32_t index_;
  const PoolSettings settings_;

  troupe::Mutex mu_;
  Mailbox* head_ ABSL_GUARDED_BY(mu_) = nullptr;
  Mailbox* tail_ ABSL_GUARDED_BY(mu_) = nullptr;
  // Mirrors the queue length for lock-free "is there work" checks (seq_cst, see header comment).
  std::atomic<int64_t> queued_{0};
  std::atomic<int32_t> sleepers_{0};
  std::counting_semaphore<> wake_{0};
  std::atomic<bool> stopping_{false};
  uint64_t shuffle_state_ ABSL_GUARDED_BY(mu_);

  std::vector<std::unique_ptr<WorkerContext>> contexts_;
  std::vector<std::thread> threads_;
};

}  // namespace troupe::internal
