// SPDX-License-Identifier: Apache-2.0
//
// A worker's local run queue (ExecutorPool, executor_pool.h: "Where a ready mailbox waits").
//
// Thread-safety: Push and Pop by the owning worker only; StealHalfInto by another worker (into its
// own, empty queue); Size from any thread.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>

#include "actors/internal/mailbox.h"

namespace troupe::internal {

// Single-producer, multi-consumer bounded FIFO of mailboxes: the owner pushes and pops, other
// workers steal half. Head and tail grow forever (uint32 wrap-around is harmless: only
// differences are used).
class LocalRunQueue {
 public:
  static constexpr uint32_t kCapacity = 256;

  // Owner only. False when full.
  bool Push(Mailbox* mailbox) {
    // acquire: a thief's slot reads (before its head CAS) happen before we overwrite the slot.
    const uint32_t head = head_.load(std::memory_order_acquire);
    const uint32_t tail = tail_.load(std::memory_order_relaxed);
    if (tail - head >= kCapacity) {
      return false;
    }
    slots_[tail % kCapacity].store(mailbox, std::memory_order_relaxed);
    // release: a thief that sees the new tail sees the slot and the mailbox's contents.
    tail_.store(tail + 1, std::memory_order_release);
    return true;
  }
  // Owner only.
  Mailbox* Pop() {
    uint32_t head = head_.load(std::memory_order_acquire);
    while (true) {
      const uint32_t tail = tail_.load(std::memory_order_relaxed);
      if (tail == head) {
        return nullptr;
      }
      Mailbox* mailbox = slots_[head % kCapacity].load(std::memory_order_relaxed);
      if (head_.compare_exchange_weak(head, head + 1, std::memory_order_acq_rel)) {
        return mailbox;
      }
    }
  }
  // Called by the owner of `thief`, an empty queue (never by this queue's owner): moves up to half
  // (rounded up) of this queue's mailboxes to `thief` and returns how many.
  uint32_t StealHalfInto(LocalRunQueue* thief) {
    const uint32_t thief_tail = thief->tail_.load(std::memory_order_relaxed);
    while (true) {
      uint32_t head = head_.load(std::memory_order_acquire);
      const uint32_t tail = tail_.load(std::memory_order_acquire);
      uint32_t n = tail - head;
      n -= n / 2;
      if (n == 0) {
        return 0;
      }
      if (n > kCapacity / 2) {
        continue;  // head and tail read at different times; read again
      }
      // Copied into the thief's slots beyond its tail, invisible until the tail moves.
      for (uint32_t i = 0; i < n; ++i) {
        thief->slots_[(thief_tail + i) % kCapacity].store(
            slots_[(head + i) % kCapacity].load(std::memory_order_relaxed),
            std::memory_order_relaxed);
      }
      if (head_.compare_exchange_weak(head, head + n, std::memory_order_acq_rel)) {
        thief->tail_.store(thief_tail + n, std::memory_order_release);
        return n;
      }
    }
  }
  // Any thread; seq_cst so that a parking worker's check pairs with the producer's fence.
  uint32_t Size() const {
    const uint32_t head = head_.load(std::memory_order_seq_cst);
    return tail_.load(std::memory_order_seq_cst) - head;
  }

 private:
  alignas(64) std::atomic<uint32_t> head_{0};
  alignas(64) std::atomic<uint32_t> tail_{0};
  std::array<std::atomic<Mailbox*>, kCapacity> slots_{};
};

}  // namespace troupe::internal
