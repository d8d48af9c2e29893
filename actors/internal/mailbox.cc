// SPDX-License-Identifier: Apache-2.0
#include "actors/internal/mailbox.h"

#include "actors/actor.h"
#include "actors/check.h"
#include "actors/event.h"

namespace troupe::internal {

Mailbox::~Mailbox() {
  switch (kind_) {
    case MailboxKind::kSimple:
      delete static_cast<SimpleQueue*>(other_);
      break;
    case MailboxKind::kRevolving:
      delete static_cast<RevolvingQueue*>(other_);
      break;
    case MailboxKind::kHTSwap:
      delete static_cast<HTSwapQueue*>(other_);
      break;
    case MailboxKind::kPriority:
      delete static_cast<PriorityQueue*>(other_);
      break;
    case MailboxKind::kPoolDefault:
    case MailboxKind::kLockFree:
      break;
  }
}

void Mailbox::InitKind(MailboxKind kind) {
  TROUPE_CHECK(other_ == nullptr && kind_ == MailboxKind::kLockFree) << "mailbox kind set twice";
  switch (kind) {
    case MailboxKind::kSimple:
      other_ = new SimpleQueue;
      break;
    case MailboxKind::kRevolving:
      other_ = new RevolvingQueue;
      break;
    case MailboxKind::kHTSwap:
      other_ = new HTSwapQueue;
      break;
    case MailboxKind::kPriority:
      other_ = new PriorityQueue;
      break;
    case MailboxKind::kLockFree:
      break;
    case MailboxKind::kPoolDefault:
      TROUPE_CHECK(false) << "a mailbox needs a concrete kind";
  }
  kind_ = kind;
}

void Mailbox::PushOther(EventHandle* ev) {
  switch (kind_) {
    case MailboxKind::kLockFree:
      queue_.Push(ev);
      return;
    case MailboxKind::kSimple:
      static_cast<SimpleQueue*>(other_)->Push(ev);
      return;
    case MailboxKind::kRevolving:
      static_cast<RevolvingQueue*>(other_)->Push(ev);
      return;
    case MailboxKind::kHTSwap:
      static_cast<HTSwapQueue*>(other_)->Push(ev);
      return;
    case MailboxKind::kPriority:
      static_cast<PriorityQueue*>(other_)->Push(ev);
      return;
    case MailboxKind::kPoolDefault:
      break;
  }
  TROUPE_CHECK(false) << "mailbox of no kind";
}

EventHandle* Mailbox::Pop() {
  if (kind_ == MailboxKind::kLockFree) {
    return AsEvent(queue_.Pop());
  }
  return PopOther();
}

EventHandle* Mailbox::PopOther() {
  switch (kind_) {
    case MailboxKind::kSimple:
      return static_cast<SimpleQueue*>(other_)->Pop();
    case MailboxKind::kRevolving:
      return AsEvent(static_cast<RevolvingQueue*>(other_)->Pop());
    case MailboxKind::kHTSwap:
      return AsEvent(static_cast<HTSwapQueue*>(other_)->Pop());
    case MailboxKind::kPriority:
      return AsEvent(static_cast<PriorityQueue*>(other_)->Pop());
    case MailboxKind::kLockFree:
      return AsEvent(queue_.Pop());
    case MailboxKind::kPoolDefault:
      break;
  }
  return nullptr;
}

bool Mailbox::IsEmpty() const {
  switch (kind_) {
    case MailboxKind::kSimple:
      return static_cast<const SimpleQueue*>(other_)->IsEmpty();
    case MailboxKind::kRevolving:
      return static_cast<const RevolvingQueue*>(other_)->IsEmpty();
    case MailboxKind::kHTSwap:
      return static_cast<const HTSwapQueue*>(other_)->IsEmpty();
    case MailboxKind::kPriority:
      return static_cast<const PriorityQueue*>(other_)->IsEmpty();
    case MailboxKind::kLockFree:
    case MailboxKind::kPoolDefault:
      break;
  }
  return queue_.IsEmpty();
}

uint64_t Mailbox::BeginIdleOther() const {
  // Read before StoreIdle: afterwards another reader may own the mailbox and move these.
  switch (kind_) {
    case MailboxKind::kSimple:
      return static_cast<const SimpleQueue*>(other_)->ReaderToken();
    case MailboxKind::kRevolving:
      return static_cast<const RevolvingQueue*>(other_)->ReaderDrained() ? 0 : 1;
    case MailboxKind::kHTSwap:
      return static_cast<const HTSwapQueue*>(other_)->ReaderDrained() ? 0 : 1;
    case MailboxKind::kPriority:
      return static_cast<const PriorityQueue*>(other_)->ReaderDrained() ? 0 : 1;
    case MailboxKind::kLockFree:
    case MailboxKind::kPoolDefault:
      break;
  }
  return queue_.ReaderDrained() ? 0 : 1;
}

bool Mailbox::PublishedSinceOther(uint64_t token) const {
  // Only the queues' shared atomics: the reader-private parts were captured in `token`.
  switch (kind_) {
    case MailboxKind::kSimple:
      return static_cast<const SimpleQueue*>(other_)->PublishedSince(token);
    case MailboxKind::kRevolving:
      return token != 0 || static_cast<const RevolvingQueue*>(other_)->Published();
    case MailboxKind::kHTSwap:
      return token != 0 || static_cast<const HTSwapQueue*>(other_)->Published();
    case MailboxKind::kPriority:
      return token != 0 || static_cast<const PriorityQueue*>(other_)->Published();
    case MailboxKind::kLockFree:
    case MailboxKind::kPoolDefault:
      break;
  }
  return token != 0 || queue_.Published();
}

size_t Mailbox::FootprintBytes() const {
  size_t bytes = sizeof(Mailbox);
  switch (kind_) {
    case MailboxKind::kSimple:
      bytes += static_cast<const SimpleQueue*>(other_)->FootprintBytes();
      break;
    case MailboxKind::kRevolving:
      bytes += static_cast<const RevolvingQueue*>(other_)->FootprintBytes();
      break;
    case MailboxKind::kHTSwap:
      bytes += static_cast<const HTSwapQueue*>(other_)->FootprintBytes();
      break;
    case MailboxKind::kPriority:
      bytes += static_cast<const PriorityQueue*>(other_)->FootprintBytes();
      break;
    case MailboxKind::kLockFree:
    case MailboxKind::kPoolDefault:
      break;
  }
  return bytes;
}

Actor* Mailbox::FindActorIn(Actor* first, uint64_t local_id) {
  for (Actor* actor = first; actor != nullptr; actor = actor->next_in_mailbox_) {
    if (actor->self_.local_id() == local_id) {
      return actor;
    }
  }
  return nullptr;
}

void Mailbox::AttachActor(Actor* actor) {
  actor->next_in_mailbox_ = actors_;
  actors_ = actor;
  tls_activation_signals |= kActorsChanged;
}

void Mailbox::DetachActor(Actor* actor) {
  for (Actor** link = &actors_; *link != nullptr; link = &(*link)->next_in_mailbox_) {
    if (*link == actor) {
      *link = actor->next_in_mailbox_;
      actor->next_in_mailbox_ = nullptr;
      tls_activation_signals |= kActorsChanged;
      return;
    }
  }
}

}  // namespace troupe::internal
