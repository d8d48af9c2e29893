// SPDX-License-Identifier: Apache-2.0
//
// The default lock-free intrusive mailbox: many writers, one reader, and the activation protocol.
//
// Queue: Vyukov's intrusive MPSC queue with an embedded stub node. A push is one atomic exchange
// plus one release store and allocates nothing (the link lives in the EventHandle).
//
// Activation state machine (`state_`):
//
//   | from       | event                                  | to         | who                      |
//   |------------|----------------------------------------|------------|--------------------------|
//   | kIdle      | push sees kIdle, CAS wins              | kScheduled | that writer schedules it |
//   | kIdle      | TryLock CAS wins (Register reuses it)  | kScheduled | the registering thread   |
//   | kScheduled | reader drained it (TryIdle)            | kIdle      | the reader               |
//   | kIdle      | TryIdle re-check sees work, CAS wins   | kScheduled | the reader keeps running |
//
// No lost wake-up: the writer publishes its node (seq_cst exchange) before it reads the state;
// the reader publishes kIdle (seq_cst store) before it re-reads the tail. Whichever comes second
// sees the other, and the CAS lets exactly one of them schedule the mailbox (no double activation).
//
// Thread-safety: Push and IsIdle are thread-safe; everything else is reader-only (the thread that
// holds the mailbox in kScheduled).
#pragma once

#include <atomic>
#include <cstdint>

#include "actors/internal/mailbox_node.h"

namespace troupe {
class Actor;
class EventHandle;
}  // namespace troupe

namespace troupe::internal {

class alignas(64) Mailbox {
 public:
  enum State : uint32_t { kIdle = 0, kScheduled = 1 };

  Mailbox() = default;
  ~Mailbox() = default;
  Mailbox(const Mailbox&) = delete;
  Mailbox& operator=(const Mailbox&) = delete;
  Mailbox(Mailbox&&) = delete;
  Mailbox& operator=(Mailbox&&) = delete;

  // -- writers (any thread) ---------------------------------------------------------------------

  // Appends `ev` and returns true when this call moved the mailbox from idle to scheduled; the
  // caller must then hand the mailbox to its pool.
  bool Push(EventHandle* ev);

  // Moves an idle mailbox to kScheduled for the caller; false when someone else holds it.
  bool TryLock() {
    uint32_t expected = kIdle;
    // acq_rel pairs with the release in TryIdle: the new owner sees the previous owner's writes.
    return state_.compare_exchange_strong(expected, kScheduled, std::memory_order_acq_rel);
  }

  bool IsIdle() const { return state_.load(std::memory_order_acquire) == kIdle; }

  // -- reader (the thread holding kScheduled) --------------------------------------------------

  // Removes the oldest event, or returns nullptr when none is ready (empty, or a writer is between
  // its exchange and its link — IsEmpty then says false).
  EventHandle* Pop() { return Pop(head_); }

  // As Pop, with the reader's cursor held by the caller: a worker copies the cursor out for an
  // activation (cursor()), pops with it, and writes it back (set_cursor) before TryIdle or before
  // handing the mailbox on. The cursor shares the cache line that writers exchange on; not writing
  // it per event keeps that line from bouncing between the reader's and the writers' cores.
  EventHandle* Pop(MailboxNode*& head);
  MailboxNode* cursor() const { return head_; }
  void set_cursor(MailboxNode* head) { head_ = head; }

  // Returns true when no event is queued or being pushed.
  bool IsEmpty() const {
    return head_ == &stub_ && tail_.load(std::memory_order_seq_cst) == &stub_;
  }

  // Gives the mailbox up after Pop returned nullptr. Returns true when the mailbox is now idle (the
  // reader must not touch it again) and false when more work arrived and the reader owns it again;
  // another reader may have run it in between, so a cached cursor must be reloaded.
  bool TryIdle();

  // -- actors bound to this mailbox (reader, or the owner after TryLock) -----------------------

  Actor* FindActor(uint64_t local_id) const;
  void AttachActor(Actor* actor);
  void DetachActor(Actor* actor);
  bool HasActors() const { return actors_ != nullptr; }
  Actor* first_actor() const { return actors_; }

  uint32_t pool() const { return pool_; }
  void set_pool(uint32_t pool) { pool_ = pool; }

  // Link in the pool's ready queue; owned by the pool while the mailbox is queued there.
  Mailbox* next_ready = nullptr;

 private:
  // Producers exchange here; points at the newest node (or the stub when empty).
  std::atomic<MailboxNode*> tail_{&stub_};
  // The reader's cursor; the oldest unconsumed node (or the stub).
  MailboxNode* head_ = &stub_;
  MailboxNode stub_;
  std::atomic<uint32_t> state_{kIdle};
  uint32_t pool_ = 0;
  // Intrusive list through Actor::next_in_mailbox_.
  Actor* actors_ = nullptr;
};

static_assert(sizeof(Mailbox) == 64, "an idle mailbox costs one cache line");

}  // namespace troupe::internal
