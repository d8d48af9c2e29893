// SPDX-License-Identifier: Apache-2.0
//
// The queues behind the mailbox kinds (actors/mailbox_kind.h). Each is one reader, many writers,
// and links or stores the events it is given without allocating per push.
//
// The activation protocol (mailbox.h) needs two things of every queue:
//   - Push publishes the event with a seq_cst read-modify-write or store, so that the writer's
//     following seq_cst load of the mailbox state cannot be ordered before it;
//   - after the reader stores kIdle (seq_cst), a seq_cst load tells whether anything was published
//     that the reader has not taken. What the reader knew before its store is captured first
//     (ReaderToken), because once kIdle is stored another reader may own the queue.
//
// Thread-safety: Push and Published/PublishedSince are thread-safe; everything else belongs to the
// reader (the thread holding the mailbox).
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "actors/internal/mailbox_node.h"

namespace troupe {
class EventHandle;
}  // namespace troupe

namespace troupe::internal {

// Vyukov's intrusive MPSC queue with an embedded stub node: a push is one atomic exchange plus one
// release store. Pop may return nullptr while a writer is between its exchange and its link
// (IsEmpty is then false); the caller retries later.
class IntrusiveMpscQueue {
 public:
  IntrusiveMpscQueue() = default;
  ~IntrusiveMpscQueue() = default;
  IntrusiveMpscQueue(const IntrusiveMpscQueue&) = delete;
  IntrusiveMpscQueue& operator=(const IntrusiveMpscQueue&) = delete;
  IntrusiveMpscQueue(IntrusiveMpscQueue&&) = delete;
  IntrusiveMpscQueue& operator=(IntrusiveMpscQueue&&) = delete;

  void Push(MailboxNode* node) {
    node->next.store(nullptr, std::memory_order_relaxed);
    // seq_cst: the publication the activation protocol orders before the state load.
    MailboxNode* prev = tail_.exchange(node, std::memory_order_seq_cst);
    // release: pairs with the reader's acquire load of `next` in Pop; publishes the event body.
    prev->next.store(node, std::memory_order_release);
  }

  // Removes the oldest node, with the reader's cursor held by the caller (see Mailbox::Pop).
  MailboxNode* Pop(MailboxNode*& head);
  MailboxNode* Pop() { return Pop(head_); }
  MailboxNode* cursor() const { return head_; }
  void set_cursor(MailboxNode* head) { head_ = head; }

  // Reader: true when at least `count` published nodes follow the reader's cursor `head` (the
  // stub not counted). Walks at most count + 1 links, so it costs what popping them will.
  bool HasAtLeast(const MailboxNode* head, uint32_t count) const {
    uint32_t seen = 0;
    for (const MailboxNode* node = head; node != nullptr && seen < count;
         node = node->next.load(std::memory_order_acquire)) {
      seen += node != &stub_ ? 1 : 0;
    }
    return seen >= count;
  }
  // Reader: true when the reader holds no node (everything popped up to the stub).
  bool ReaderDrained() const { return head_ == &stub_; }
  // Any thread: true when a node was pushed that the reader has not re-linked the stub behind.
  bool Published() const { return tail_.load(std::memory_order_seq_cst) != &stub_; }
  bool IsEmpty() const { return ReaderDrained() && !Published(); }

 private:
  // Writers exchange here; points at the newest node (or the stub when empty).
  std::atomic<MailboxNode*> tail_{&stub_};
  // The reader's cursor: the oldest unconsumed node (or the stub).
  MailboxNode* head_ = &stub_;
  MailboxNode stub_;
};

// kSimple: a ring of event pointers in segments of kSlots. Writers serialize on a spin lock (held
// for a few stores) and publish with a count; the reader never takes the lock, reads slots with
// plain loads and the count only when it has caught up. A segment the reader finished becomes the
// spare the writers take next, so a mailbox whose backlog stays under one segment allocates once.
class SimpleQueue {
 public:
  static constexpr uint32_t kSlots = 32;

  SimpleQueue();
  ~SimpleQueue();
  SimpleQueue(const SimpleQueue&) = delete;
  SimpleQueue& operator=(const SimpleQueue&) = delete;
  SimpleQueue(SimpleQueue&&) = delete;
  SimpleQueue& operator=(SimpleQueue&&) = delete;

  void Push(EventHandle* ev);
  EventHandle* Pop();

  uint64_t ReaderToken() const { return taken_; }
  bool PublishedSince(uint64_t token) const {
    return published_.load(std::memory_order_seq_cst) != token;
  }
  bool IsEmpty() const { return !PublishedSince(taken_); }
  size_t FootprintBytes() const;

 private:
  struct Segment {
    std::array<EventHandle*, kSlots> slots{};
    // Set by the writer that fills the last slot, before it publishes that slot.
    std::atomic<Segment*> next{nullptr};
  };

  void Lock();
  void Unlock() { locked_.store(false, std::memory_order_release); }

  // -- writers (under locked_) --
  alignas(64) std::atomic<bool> locked_{false};
  Segment* tail_segment_;
  uint32_t tail_slot_ = 0;
  // Events published so far; written under the lock, read by the reader. On a line of its own, so
  // the reader's polling does not take the lock's line away from a lone writer.
  alignas(64) std::atomic<uint64_t> published_{0};
  // -- handed from the reader to the writers --
  alignas(64) std::atomic<Segment*> spare_{nullptr};
  // -- reader --
  alignas(64) Segment* head_segment_;
  uint32_t head_slot_ = 0;
  uint64_t taken_ = 0;
  // The reader's copy of published_, reloaded when taken_ catches up with it.
  uint64_t known_published_ = 0;
};

// kHTSwap: writers push onto a Treiber stack (compare-exchange on the top); the reader takes the
// whole stack with one exchange, reverses it into its own FIFO list and pops that with plain
// loads. Pop never sees a half-linked node.
class HTSwapQueue {
 public:
  HTSwapQueue() = default;
  ~HTSwapQueue() = default;
  HTSwapQueue(const HTSwapQueue&) = delete;
  HTSwapQueue& operator=(const HTSwapQueue&) = delete;
  HTSwapQueue(HTSwapQueue&&) = delete;
  HTSwapQueue& operator=(HTSwapQueue&&) = delete;

  void Push(MailboxNode* node) {
    MailboxNode* top = top_.load(std::memory_order_relaxed);
    do {
      node->next.store(top, std::memory_order_relaxed);
      // seq_cst on success: the publication (and release of the body) the protocol needs.
    } while (!top_.compare_exchange_weak(top, node, std::memory_order_seq_cst,
                                         std::memory_order_relaxed));
  }
  MailboxNode* Pop();

  bool ReaderDrained() const { return taken_ == nullptr; }
  bool Published() const { return top_.load(std::memory_order_seq_cst) != nullptr; }
  bool IsEmpty() const { return ReaderDrained() && !Published(); }
  size_t FootprintBytes() const { return sizeof(*this); }

 private:
  alignas(64) std::atomic<MailboxNode*> top_{nullptr};
  // The reader's batch, oldest first.
  alignas(64) MailboxNode* taken_ = nullptr;
};

// Several intrusive MPSC queues, each on its own cache line. RevolvingQueue and PriorityQueue
// differ only in which lane a push goes to and in which order the reader looks at the lanes.
template <uint32_t kLanes>
class LaneSet {
 public:
  bool ReaderDrained() const {
    for (const Lane& lane : lanes_) {
      if (!lane.queue.ReaderDrained()) {
        return false;
      }
    }
    return true;
  }
  bool Published() const {
    for (const Lane& lane : lanes_) {
      if (lane.queue.Published()) {
        return true;
      }
    }
    return false;
  }
  bool IsEmpty() const { return ReaderDrained() && !Published(); }

 protected:
  struct alignas(64) Lane {
    IntrusiveMpscQueue queue;
  };
  std::array<Lane, kLanes> lanes_;
};

// kRevolving: kLanes lanes; the events of one sender always go to the same lane (chosen from the
// sender's id, or per thread for events without a sender), so order per sender holds. The reader
// takes up to kBurst events from a lane, then moves to the next one.
class RevolvingQueue : public LaneSet<4> {
 public:
  static constexpr uint32_t kLaneCount = 4;
  static constexpr uint32_t kBurst = 8;

  void Push(EventHandle* ev);
  MailboxNode* Pop();
  size_t FootprintBytes() const { return sizeof(*this); }

 private:
  uint32_t current_ = 0;
  uint32_t burst_ = 0;
};

// kPriority: class 0 = system events (bootstrap, poison, wakeup, undelivered), 1 = kPriorityHigh,
// 2 = normal, 3 = kPriorityLow. The reader always takes from the lowest non-empty class.
class PriorityQueue : public LaneSet<4> {
 public:
  static constexpr uint32_t kClassCount = 4;

  // Returns the class `ev` is queued in.
  static uint32_t ClassOf(const EventHandle& ev);

  void Push(EventHandle* ev);
  MailboxNode* Pop();
  size_t FootprintBytes() const { return sizeof(*this); }
};

}  // namespace troupe::internal
