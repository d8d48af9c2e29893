// SPDX-License-Identifier: Apache-2.0
//
// ExecutorPool's I/O polling (IoPoller): the protocol is in executor_pool.h's file comment.
#include <atomic>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

#include "actors/internal/executor_pool.h"

namespace troupe::internal {

absl::Status ExecutorPool::AttachPoller(IoPoller* poller) {
  IoPoller* expected = nullptr;
  if (poller == nullptr ||
      !poller_.compare_exchange_strong(expected, poller, std::memory_order_seq_cst)) {
    return absl::AlreadyExistsError(
        absl::StrCat("pool \"", settings_.name, "\" already runs an I/O poller"));
  }
  // A worker parked on the semaphore moves to the poller when it next goes idle.
  WakeOne();
  return absl::OkStatus();
}

void ExecutorPool::DetachPoller(IoPoller* poller) {
  IoPoller* expected = poller;
  if (poller == nullptr ||
      !poller_.compare_exchange_strong(expected, nullptr, std::memory_order_seq_cst)) {
    return;
  }
  // A worker that took the poller before the pointer was cleared may be about to wait in it: the
  // interrupt is never lost, so that wait returns.
  poller->Interrupt();
  // seq_cst: a worker (or a producer in InterruptPoller) that read the pointer before it was
  // cleared announced itself before reading it, so it is seen here.
  while (poller_busy_.load(std::memory_order_seq_cst) ||
         interrupters_.load(std::memory_order_seq_cst) > 0) {
    std::this_thread::yield();
  }
}

IoPoller* ExecutorPool::EnterPoller() {
  if (poller_.load(std::memory_order_relaxed) == nullptr ||
      poller_busy_.load(std::memory_order_relaxed)) {
    return nullptr;
  }
  // seq_cst: takes the loop from the previous holder (acquire, pairs with ExitPoller's release)
  // and announces this worker before it reads the pointer (pairs with DetachPoller).
  if (poller_busy_.exchange(true, std::memory_order_seq_cst)) {
    return nullptr;
  }
  IoPoller* poller = poller_.load(std::memory_order_seq_cst);
  if (poller == nullptr) {
    ExitPoller();
  }
  return poller;
}

bool ExecutorPool::PollIo(WorkerContext* context) {
  context->since_poll = 0;
  IoPoller* poller = EnterPoller();
  if (poller == nullptr) {
    return false;
  }
  context->polling = true;
  const size_t ran = poller->Poll();
  context->polling = false;
  ExitPoller();
  if (ran == 0) {
    return false;
  }
  WakeForLocal(context);
  return context->run_next.load(std::memory_order_relaxed) != nullptr || context->local.Size() > 0;
}

bool ExecutorPool::ParkInPoller(WorkerContext* context) {
  IoPoller* poller = EnterPoller();
  if (poller == nullptr) {
    return false;
  }
  // seq_cst: published before the re-check; a producer publishes its work before it reads this
  // (WakeOne), so either we see the work or it interrupts the wait.
  poller_waiting_.store(true, std::memory_order_seq_cst);
  if (HasWork(context) || stopping_.load(std::memory_order_seq_cst)) {
    poller_waiting_.store(false, std::memory_order_relaxed);
    ExitPoller();
    return true;
  }
  Parked(context, [&] {
    context->polling = true;
    poller->Wait();
    context->polling = false;
  });
  poller_waiting_.store(false, std::memory_order_relaxed);
  ExitPoller();
  WakeForLocal(context);
  return true;
}

void ExecutorPool::InterruptPoller() {
  // One interrupt per wait: the worker clears the flag itself when it wakes for another reason (a
  // late interrupt then only ends its next wait early).
  if (!poller_waiting_.exchange(false, std::memory_order_seq_cst)) {
    return;
  }
  interrupters_.fetch_add(1, std::memory_order_seq_cst);
  if (IoPoller* poller = poller_.load(std::memory_order_seq_cst); poller != nullptr) {
    poller->Interrupt();
  }
  // release: DetachPoller's load that sees the count back at zero sees the call above done.
  interrupters_.fetch_sub(1, std::memory_order_release);
}

}  // namespace troupe::internal
