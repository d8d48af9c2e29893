// SPDX-License-Identifier: Apache-2.0
//
// A mailbox: one queue of a kind from actors/mailbox_kind.h, the activation protocol, and the
// actors bound to it. Many writers, one reader.
//
// Queue: the default kind (kLockFree, Vyukov's intrusive MPSC queue) lives inline, so a mailbox of
// that kind is one cache line. The other kinds live in an object of their own that the mailbox
// owns. A mailbox's kind is set once, before its hint is published, and never changes: a sender
// holding a stale hint may push at any time, so the queue it pushes to must stay the same.
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
// No lost wake-up: the writer publishes its event (a seq_cst operation of the queue) before it
// reads the state; the reader publishes kIdle (seq_cst store) before it looks for published events
// (seq_cst load). Whichever comes second sees the other, and the CAS lets exactly one of them
// schedule the mailbox (no double activation). Push and TryIdle are each split into their steps
// (PushEvent + ActivateAfterPush; BeginIdle, StoreIdle, FinishIdle) so that a test can interleave
// them; the composed calls are what the runtime uses.
//
// Thread-safety: Push, PushEvent, ActivateAfterPush, TryLock and IsIdle are thread-safe; everything
// else is reader-only (the thread that holds the mailbox in kScheduled).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "actors/event.h"
#include "actors/internal/mailbox_node.h"
#include "actors/internal/mailbox_queues.h"
#include "actors/mailbox_kind.h"

namespace troupe {
class Actor;
}  // namespace troupe

namespace troupe::internal {

class alignas(64) Mailbox {
 public:
  enum State : uint32_t { kIdle = 0, kScheduled = 1 };

  Mailbox() = default;
  ~Mailbox();
  Mailbox(const Mailbox&) = delete;
  Mailbox& operator=(const Mailbox&) = delete;
  Mailbox(Mailbox&&) = delete;
  Mailbox& operator=(Mailbox&&) = delete;

  // Gives a mailbox no sender can reach yet its kind (kLockFree until then). Called once; `kind`
  // must not be kPoolDefault.
  void InitKind(MailboxKind kind);
  MailboxKind kind() const { return kind_; }

  // -- writers (any thread) ---------------------------------------------------------------------

  // Appends `ev` and returns true when this call moved the mailbox from idle to scheduled; the
  // caller must then hand the mailbox to its pool.
  bool Push(EventHandle* ev) {
    PushEvent(ev);
    return ActivateAfterPush();
  }
  // The two steps of Push: publish the event, then try to move the mailbox from idle to scheduled.
  void PushEvent(EventHandle* ev) {
    if (kind_ == MailboxKind::kLockFree) [[likely]] {
      queue_.Push(AsNode(ev));
      return;
    }
    PushOther(ev);
  }
  bool ActivateAfterPush() {
    // seq_cst: ordered after the queue's seq_cst publication (Dekker pair with TryIdle).
    if (state_.load(std::memory_order_seq_cst) != kIdle) {
      return false;
    }
    uint32_t expected = kIdle;
    // acq_rel: pairs with TryIdle's release so the new owner sees the previous reader's writes.
    return state_.compare_exchange_strong(expected, kScheduled, std::memory_order_acq_rel);
  }

  // Moves an idle mailbox to kScheduled for the caller; false when someone else holds it.
  bool TryLock() {
    uint32_t expected = kIdle;
    // acq_rel pairs with the release in TryIdle: the new owner sees the previous owner's writes.
    return state_.compare_exchange_strong(expected, kScheduled, std::memory_order_acq_rel);
  }

  bool IsIdle() const { return state_.load(std::memory_order_acquire) == kIdle; }

  // -- reader (the thread holding kScheduled) --------------------------------------------------

  // Removes the oldest event (by the kind's order), or returns nullptr when none is ready (empty,
  // or a writer is between two steps of its push — IsEmpty then says false).
  EventHandle* Pop();

  // As Pop, with the reader's cursor held by the caller: a worker copies the cursor out for an
  // activation (cursor()), pops with it, and writes it back (set_cursor) before TryIdle or before
  // handing the mailbox on. The cursor shares the cache line that writers exchange on; not writing
  // it per event keeps that line from bouncing between the reader's and the writers' cores. Only
  // kLockFree has a cursor; the other kinds ignore it.
  EventHandle* Pop(MailboxNode*& cursor) {
    if (kind_ != MailboxKind::kLockFree) [[unlikely]] {
      return PopOther();
    }
    return AsEvent(queue_.Pop(cursor));
  }
  // Pop for a mailbox the caller knows is of kind kLockFree: a worker reads the kind once per
  // activation, since the kind shares the line writers exchange on and reading it per event would
  // pull that line to the reader's core and back.
  EventHandle* PopLockFree(MailboxNode*& cursor) { return AsEvent(queue_.Pop(cursor)); }
  // True when at least `count` more events are queued behind `cursor` (kLockFree only; the other
  // kinds answer false).
  bool HasBacklog(const MailboxNode* cursor, uint32_t count) const {
    return kind_ == MailboxKind::kLockFree && queue_.HasAtLeast(cursor, count);
  }
  MailboxNode* cursor() const { return queue_.cursor(); }
  void set_cursor(MailboxNode* cursor) { queue_.set_cursor(cursor); }

  // Returns true when no event is queued or being pushed.
  bool IsEmpty() const;

  // Gives the mailbox up after Pop returned nullptr. Returns true when the mailbox is now idle (the
  // reader must not touch it again) and false when more work arrived and the reader owns it again;
  // another reader may have run it in between, so a cached cursor must be reloaded.
  bool TryIdle() {
    const uint64_t token = BeginIdle();
    StoreIdle();
    return FinishIdle(token);
  }
  // The steps of TryIdle. BeginIdle captures what the reader holds (0 = nothing, for the
  // kinds other than kSimple; kSimple's count of events taken); after StoreIdle the mailbox may
  // belong to another reader, and FinishIdle touches only the queue's shared atomics.
  uint64_t BeginIdle() const {
    if (kind_ == MailboxKind::kLockFree) [[likely]] {
      return queue_.ReaderDrained() ? 0 : 1;
    }
    return BeginIdleOther();
  }
  void StoreIdle() {
    // seq_cst: ordered before FinishIdle's loads (Dekker pair with ActivateAfterPush).
    state_.store(kIdle, std::memory_order_seq_cst);
  }
  bool FinishIdle(uint64_t token) { return !PublishedSince(token) || !Reclaim(); }
  // TryIdle for a mailbox the caller knows is of kind kLockFree (see PopLockFree).
  bool TryIdleLockFree() {
    const bool holds = !queue_.ReaderDrained();
    StoreIdle();
    return !(holds || queue_.Published()) || !Reclaim();
  }

  // Bytes this mailbox occupies while idle: the table slot plus the queue of a non-default kind.
  size_t FootprintBytes() const;

  // -- actors bound to this mailbox (reader, or the owner after TryLock) -----------------------

  // Returns the actor `local_id` in the list headed by `first`, as first_actor() returned it (a
  // worker keeps it for an activation: see kActorsChanged), or nullptr.
  static Actor* FindActorIn(Actor* first, uint64_t local_id);
  void AttachActor(Actor* actor);
  void DetachActor(Actor* actor);
  bool HasActors() const { return actors_ != nullptr; }
  Actor* first_actor() const { return actors_; }

  uint32_t pool() const { return pool_; }
  void set_pool(uint32_t pool) { pool_ = static_cast<uint16_t>(pool); }

  // Run time accumulated by fair-mode pools, in nanoseconds (reader-owned).
  uint64_t run_time_ns() const { return run_time_ns_; }
  void add_run_time_ns(uint64_t ns) { run_time_ns_ += ns; }
  void reset_run_time() { run_time_ns_ = 0; }

  // Doublings of the pool's event budget this mailbox has earned by ending activations with a
  // backlog (ExecutorPool::Run; written by the reader, or by Runtime::Register before the mailbox
  // is reachable; one fewer after each drain or wake-up).
  uint32_t budget_shift() const { return budget_shift_.load(std::memory_order_relaxed); }
  void set_budget_shift(uint32_t shift) {
    budget_shift_.store(static_cast<uint8_t>(shift), std::memory_order_relaxed);
  }
  // Reader: one doubling fewer, if it has any (on a drain, or a turn that woke another mailbox).
  void ShrinkBudget() {
    if (const uint32_t shift = budget_shift(); shift != 0) [[unlikely]] {
      set_budget_shift(shift - 1);
    }
  }
  // Any thread: true once the mailbox has earned kFloodShift doublings, i.e. it ended an activation
  // of 32 budgets with more still queued: its senders outrun it. (A receiver that acknowledges
  // senders on credit loses a doubling each time it wakes one, so it stays below.)
  // relaxed: a scheduling hint, read beside the push that already holds the line.
  static constexpr uint32_t kFloodShift = 6;
  bool Flooded() const { return budget_shift_.load(std::memory_order_relaxed) >= kFloodShift; }

  // Link in the pool's ready queue; owned by the pool while the mailbox is queued there.
  Mailbox* next_ready = nullptr;

 private:
  // After StoreIdle, with work published that the reader had not taken: a writer that saw
  // kScheduled before our store did not schedule us, so take the mailbox back (true). If its CAS
  // wins instead, it schedules the mailbox and we must let go (false).
  bool Reclaim() {
    uint32_t expected = kIdle;
    // acq_rel: pairs with ActivateAfterPush's CAS and with TryIdle's release by another reader.
    return state_.compare_exchange_strong(expected, kScheduled, std::memory_order_acq_rel);
  }
  static EventHandle* AsEvent(MailboxNode* node) { return static_cast<EventHandle*>(node); }
  static MailboxNode* AsNode(EventHandle* ev) { return ev; }
  // True when something was published that the reader (as captured by `token`) had not taken.
  bool PublishedSince(uint64_t token) const {
    if (kind_ == MailboxKind::kLockFree) [[likely]] {
      return token != 0 || queue_.Published();
    }
    return PublishedSinceOther(token);
  }
  // The kinds other than kLockFree.
  void PushOther(EventHandle* ev);
  EventHandle* PopOther();
  uint64_t BeginIdleOther() const;
  bool PublishedSinceOther(uint64_t token) const;

  // The kLockFree queue (unused by the other kinds).
  IntrusiveMpscQueue queue_;
  std::atomic<uint32_t> state_{kIdle};
  // Pool indexes fit (ActorId::kMaxPool); 16 bits leave room for run_time_ns_ in the line.
  uint16_t pool_ = 0;
  MailboxKind kind_ = MailboxKind::kLockFree;
  // Written by the reader, read by senders (Flooded).
  std::atomic<uint8_t> budget_shift_{0};
  // Intrusive list through Actor::next_in_mailbox_.
  Actor* actors_ = nullptr;
  // The queue of the other kinds: SimpleQueue, RevolvingQueue, HTSwapQueue or PriorityQueue.
  void* other_ = nullptr;
  uint64_t run_time_ns_ = 0;
};

// What handlers tell the worker running their activation (ExecutorPool::Run), as bits of one
// thread-local byte, so that the worker tests them all with one load after each event:
// - kActorsChanged: AttachActor or DetachActor changed a mailbox's actor list (only the mailbox's
//   holder does, on its thread). A worker keeps the list's head for an activation rather than
//   reading it per event from the line writers exchange on, and reads it again then.
// - kSentToFlooded: a send found its recipient's mailbox flooded (Runtime::Deliver), and
//   tls_flooded_recipient names that mailbox. The worker then ends the sending activation after
//   the handler, unless the mailbox is its own.
enum ActivationSignal : uint8_t { kActorsChanged = 1, kSentToFlooded = 2 };
inline thread_local uint8_t tls_activation_signals = 0;
// Valid while tls_activation_signals has kSentToFlooded.
inline thread_local Mailbox* tls_flooded_recipient = nullptr;

static_assert(sizeof(Mailbox) == 64, "an idle mailbox of the default kind costs one cache line");

}  // namespace troupe::internal
