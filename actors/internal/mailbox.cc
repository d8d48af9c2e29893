// SPDX-License-Identifier: Apache-2.0
#include "actors/internal/mailbox.h"

#include "actors/actor.h"
#include "actors/event.h"

namespace troupe::internal {

bool Mailbox::Push(EventHandle* ev) {
  MailboxNode* node = ev;
  node->next.store(nullptr, std::memory_order_relaxed);
  // seq_cst: must be ordered before the state load below (Dekker pair with TryIdle).
  MailboxNode* prev = tail_.exchange(node, std::memory_order_seq_cst);
  // release: pairs with the reader's acquire load of `next` in Pop; publishes the event body.
  prev->next.store(node, std::memory_order_release);
  if (state_.load(std::memory_order_seq_cst) != kIdle) {
    return false;
  }
  uint32_t expected = kIdle;
  // acq_rel: pairs with TryIdle's release so the new owner sees the previous reader's writes.
  return state_.compare_exchange_strong(expected, kScheduled, std::memory_order_acq_rel);
}

EventHandle* Mailbox::Pop(MailboxNode*& head_ref) {
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
    return static_cast<EventHandle*>(head);
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
    return static_cast<EventHandle*>(head);
  }
  return nullptr;
}

bool Mailbox::TryIdle() {
  // Read the reader-owned cursor before letting go: once kIdle is stored another thread may own
  // the mailbox and move head_.
  const bool drained = head_ == &stub_;
  // seq_cst: ordered before the tail load below (Dekker pair with Push).
  state_.store(kIdle, std::memory_order_seq_cst);
  if (drained && tail_.load(std::memory_order_seq_cst) == &stub_) {
    return true;
  }
  uint32_t expected = kIdle;
  // A writer that saw kScheduled before our store did not schedule us: take the mailbox back. If
  // its CAS wins instead, it schedules the mailbox and we must let go.
  return !state_.compare_exchange_strong(expected, kScheduled, std::memory_order_acq_rel);
}

Actor* Mailbox::FindActor(uint64_t local_id) const {
  for (Actor* actor = actors_; actor != nullptr; actor = actor->next_in_mailbox_) {
    if (actor->self_.local_id() == local_id) {
      return actor;
    }
  }
  return nullptr;
}

void Mailbox::AttachActor(Actor* actor) {
  actor->next_in_mailbox_ = actors_;
  actors_ = actor;
}

void Mailbox::DetachActor(Actor* actor) {
  for (Actor** link = &actors_; *link != nullptr; link = &(*link)->next_in_mailbox_) {
    if (*link == actor) {
      *link = actor->next_in_mailbox_;
      actor->next_in_mailbox_ = nullptr;
      return;
    }
  }
}

}  // namespace troupe::internal
