// SPDX-License-Identifier: Apache-2.0
#include "actors/internal/mailbox_table.h"

#include <algorithm>

#include "actors/check.h"

namespace troupe::internal {

MailboxTable::MailboxTable(uint32_t max_mailboxes)
    : max_mailboxes_(std::min<uint64_t>(max_mailboxes, uint64_t{kChunkSize} * kMaxChunks - 1)),
      chunks_(kMaxChunks) {}

MailboxTable::~MailboxTable() {
  for (uint32_t i = 0; i < kMaxChunks; ++i) {
    delete[] chunks_[i].load(std::memory_order_relaxed);
  }
}

std::pair<Mailbox*, uint32_t> MailboxTable::Allocate(MailboxKind kind) {
  TROUPE_CHECK(kind != MailboxKind::kPoolDefault && static_cast<uint32_t>(kind) < kMailboxKindCount)
      << "Allocate needs a concrete mailbox kind, got " << static_cast<int>(kind);
  troupe::MutexLock lock(&mu_);
  std::deque<uint32_t>& free = free_[static_cast<uint32_t>(kind)];
  // A freed mailbox may still be running (a worker reporting stale events as undelivered); skip it
  // and retry later rather than wait.
  for (size_t tries = 0; tries < 4 && !free.empty(); ++tries) {
    const uint32_t hint = free.back();
    free.pop_back();
    Mailbox* mailbox = Get(hint);
    if (mailbox->TryLock()) {
      ++allocated_;
      return {mailbox, hint};
    }
    free.push_front(hint);
  }
  const uint32_t hint = next_hint_.load(std::memory_order_relaxed);
  if (hint > max_mailboxes_) {
    return {nullptr, 0};
  }
  const uint32_t chunk = hint >> kChunkBits;
  if (chunks_[chunk].load(std::memory_order_relaxed) == nullptr) {
    // release: pairs with the acquire in Get; readers see constructed mailboxes.
    chunks_[chunk].store(new Mailbox[kChunkSize], std::memory_order_release);
  }
  // Lock the mailbox before publishing its hint: no sender can reach it yet, so this cannot fail.
  Mailbox* mailbox = chunks_[chunk].load(std::memory_order_relaxed) + (hint & (kChunkSize - 1));
  TROUPE_CHECK(mailbox->TryLock()) << "fresh mailbox " << hint << " is not idle";
  // The kind is fixed before the hint is published (the release below), and never changes.
  mailbox->InitKind(kind);
  next_hint_.store(hint + 1, std::memory_order_release);
  ++allocated_;
  return {mailbox, hint};
}

void MailboxTable::Free(uint32_t hint) {
  troupe::MutexLock lock(&mu_);
  free_[static_cast<uint32_t>(Get(hint)->kind())].push_back(hint);
  --allocated_;
}

uint64_t MailboxTable::LiveCount() const {
  troupe::MutexLock lock(&mu_);
  return allocated_;
}

}  // namespace troupe::internal
