// SPDX-License-Identifier: Apache-2.0
#include "actors/internal/mailbox_queues.h"

#include <thread>

#include "actors/event.h"
#include "actors/events.h"
#include "actors/internal/cpu_relax.h"

namespace troupe::internal {
namespace {

// The lane of events sent without a sender: one per thread, handed out in turn.
uint32_t ThreadLane() {
  static std::atomic<uint32_t> next_lane{0};
  thread_local const uint32_t lane = next_lane.fetch_add(1, std::memory_order_relaxed);
  return lane;
}

}  // namespace

// -- IntrusiveMpscQueue ---------------------------------------------------------------------------

MailboxNode* IntrusiveMpscQueue::Pop(MailboxNode*& head_ref) {
  MailboxNode* head = head_ref;
  MailboxNode* next = head->next.load(std::memory_order_acquire);
  if (head == &stub_) {
    if (next == nullptr) {
      return nullptr;
    }
    head_ref = next;
    head = next;
    next = next->next.load(std::memory_order_acquire);
  }
  if (next != nullptr) {
    head_ref = next;
    // The next event was written by its sender's core: start pulling it over while this one is
    // handled.
    __builtin_prefetch(next);
    return head;
  }
  if (head != tail_.load(std::memory_order_acquire)) {
    // A writer has exchanged the tail but not linked its node yet.
    return nullptr;
  }
  // `head` is the last node: re-insert the stub behind it so head can advance.
  stub_.next.store(nullptr, std::memory_order_relaxed);
  MailboxNode* prev = tail_.exchange(&stub_, std::memory_order_acq_rel);
  prev->next.store(&stub_, std::memory_order_release);
  next = head->next.load(std::memory_order_acquire);
  if (next != nullptr) {
    head_ref = next;
    return head;
  }
  return nullptr;
}

// -- SimpleQueue ----------------------------------------------------------------------------------

SimpleQueue::SimpleQueue() : tail_segment_(new Segment), head_segment_(tail_segment_) {}

SimpleQueue::~SimpleQueue() {
  // Only the owner of a quiet mailbox destroys it: every segment is reachable from the reader's.
  Segment* segment = head_segment_;
  while (segment != nullptr) {
    Segment* next = segment->next.load(std::memory_order_relaxed);
    delete segment;
    segment = next;
  }
  delete spare_.load(std::memory_order_relaxed);
}

void SimpleQueue::Lock() {
  // Test-and-test-and-set: waiting writers spin on a shared copy of the line. A holder that was
  // preempted (more writers than cores) is waited for with yields, not a burnt time slice.
  while (locked_.exchange(true, std::memory_order_acquire)) {
    for (uint32_t spins = 0; locked_.load(std::memory_order_relaxed); ++spins) {
      if (spins < 64) {
        CpuRelax();
      } else {
        std::this_thread::yield();
      }
    }
  }
}

void SimpleQueue::Push(EventHandle* ev) {
  Lock();
  Segment* segment = tail_segment_;
  const uint32_t slot = tail_slot_;
  if (slot == kSlots - 1) {
    // Link the next segment before the last slot is published: a reader that takes that slot
    // finds it. acquire: pairs with the reader's release when it gave the segment up.
    Segment* next = spare_.exchange(nullptr, std::memory_order_acquire);
    if (next == nullptr) {
      next = new Segment;
    }
    segment->next.store(next, std::memory_order_relaxed);
    tail_segment_ = next;
    tail_slot_ = 0;
  } else {
    tail_slot_ = slot + 1;
  }
  segment->slots[slot] = ev;
  // seq_cst: publishes the slot (and the link above) to the reader's acquire, and is the store the
  // activation protocol orders before the state load. Only lock holders write the count.
  published_.store(published_.load(std::memory_order_relaxed) + 1, std::memory_order_seq_cst);
  Unlock();
}

EventHandle* SimpleQueue::Pop() {
  if (taken_ == known_published_) {
    // acquire: pairs with the writers' publishing store; their slots are visible.
    known_published_ = published_.load(std::memory_order_acquire);
    if (taken_ == known_published_) {
      return nullptr;
    }
  }
  EventHandle* ev = head_segment_->slots[head_slot_];
  ++taken_;
  if (++head_slot_ == kSlots) {
    Segment* done = head_segment_;
    head_segment_ = done->next.load(std::memory_order_relaxed);
    head_slot_ = 0;
    done->next.store(nullptr, std::memory_order_relaxed);
    // acq_rel: release hands our reads of `done` over to the writer that reuses it; acquire makes
    // the spare we displace (no writer took it) ours to free.
    delete spare_.exchange(done, std::memory_order_acq_rel);
  }
  return ev;
}

size_t SimpleQueue::FootprintBytes() const {
  size_t bytes = sizeof(*this);
  for (const Segment* segment = head_segment_; segment != nullptr;
       segment = segment->next.load(std::memory_order_relaxed)) {
    bytes += sizeof(Segment);
  }
  if (spare_.load(std::memory_order_relaxed) != nullptr) {
    bytes += sizeof(Segment);
  }
  return bytes;
}

// -- HTSwapQueue ----------------------------------------------------------------------------------

MailboxNode* HTSwapQueue::Pop() {
  if (taken_ == nullptr) {
    // acquire: pairs with every writer's release (their compare-exchanges form one release
    // sequence on top_), so the bodies and links of the whole batch are visible.
    MailboxNode* stack = top_.exchange(nullptr, std::memory_order_acquire);
    MailboxNode* fifo = nullptr;
    while (stack != nullptr) {
      MailboxNode* below = stack->next.load(std::memory_order_relaxed);
      stack->next.store(fifo, std::memory_order_relaxed);
      fifo = stack;
      stack = below;
    }
    taken_ = fifo;
    if (taken_ == nullptr) {
      return nullptr;
    }
  }
  MailboxNode* node = taken_;
  taken_ = node->next.load(std::memory_order_relaxed);
  return node;
}

// -- RevolvingQueue -------------------------------------------------------------------------------

void RevolvingQueue::Push(EventHandle* ev) {
  const ActorId& sender = ev->sender();
  uint32_t lane = 0;
  if (sender.IsEmpty()) {
    lane = ThreadLane();
  } else {
    // Local ids are handed out in sequence, so senders registered one after another land on
    // different lanes; the node id shifts the lanes of remote senders.
    lane = static_cast<uint32_t>((sender.local_id() + sender.node_id()) % kLaneCount);
  }
  lanes_[lane % kLaneCount].queue.Push(ev);
}

MailboxNode* RevolvingQueue::Pop() {
  // kLaneCount + 1 looks: the lane whose burst ran out gets another turn after the others.
  for (uint32_t look = 0; look <= kLaneCount; ++look) {
    if (burst_ < kBurst) {
      if (MailboxNode* node = lanes_[current_].queue.Pop(); node != nullptr) {
        ++burst_;
        return node;
      }
    }
    current_ = (current_ + 1) % kLaneCount;
    burst_ = 0;
  }
  return nullptr;
}

// -- PriorityQueue --------------------------------------------------------------------------------

uint32_t PriorityQueue::ClassOf(const EventHandle& ev) {
  const EventType type = ev.type();
  if (type >= kEvBootstrap && type < kEvSystemEnd) {
    return 0;
  }
  if (ev.HasFlag(kPriorityHigh)) {
    return 1;
  }
  if (ev.HasFlag(kPriorityLow)) {
    return 3;
  }
  return 2;
}

void PriorityQueue::Push(EventHandle* ev) { lanes_[ClassOf(*ev)].queue.Push(ev); }

MailboxNode* PriorityQueue::Pop() {
  for (Lane& lane : lanes_) {
    if (MailboxNode* node = lane.queue.Pop(); node != nullptr) {
      return node;
    }
  }
  return nullptr;
}

}  // namespace troupe::internal
