// SPDX-License-Identifier: Apache-2.0
//
// The node's mailboxes, indexed by hint. Chunks of mailboxes are allocated on demand and never
// move or disappear until the table is destroyed, so a sender holding any hint may always push to
// the mailbox (a stale event is then reported undelivered by the reader, because local ids are
// never reused). Freed hints are reused through a free list.
//
// Thread-safety: Get is lock-free and thread-safe; Allocate and Free take an internal mutex.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"

#include "actors/internal/mailbox.h"
#include "actors/sync.h"

namespace troupe::internal {

class MailboxTable {
 public:
  static constexpr uint32_t kChunkBits = 12;
  static constexpr uint32_t kChunkSize = 1u << kChunkBits;
  static constexpr uint32_t kMaxChunks = 1u << 16;

  // `max_mailboxes` bounds the number of mailboxes ever created (hint 0 is never used).
  explicit MailboxTable(uint32_t max_mailboxes);
  ~MailboxTable();
  MailboxTable(const MailboxTable&) = delete;
  MailboxTable& operator=(const MailboxTable&) = delete;
  MailboxTable(MailboxTable&&) = delete;
  MailboxTable& operator=(MailboxTable&&) = delete;

  // Returns the mailbox with `hint`, or nullptr when no mailbox with that hint was ever created.
  Mailbox* Get(uint32_t hint) const {
    // acquire: pairs with the release in Allocate; a hint at or past the high-water mark was never
    // handed out (it may come from a forged or corrupt id) and must not reach a mailbox.
    if (hint == 0 || hint >= next_hint_.load(std::memory_order_acquire)) {
      return nullptr;
    }
    const uint32_t chunk = hint >> kChunkBits;
    // acquire: pairs with the release store that published the chunk in Allocate.
    Mailbox* base = chunks_[chunk].load(std::memory_order_acquire);
    return base == nullptr ? nullptr : base + (hint & (kChunkSize - 1));
  }

  // Returns a mailbox of `kind` (not kPoolDefault) in kScheduled state owned by the caller, with no
  // actors, and its hint; or {nullptr, 0} when the table is full. A freed mailbox of the same kind
  // is reused first; a mailbox never changes kind.
  std::pair<Mailbox*, uint32_t> Allocate(MailboxKind kind = MailboxKind::kLockFree);

  // Returns `hint` to its kind's free list (its mailbox must have no actors).
  void Free(uint32_t hint);

  // Returns one past the largest hint ever handed out.
  uint32_t HighWater() const { return next_hint_.load(std::memory_order_acquire); }

  // Returns the number of mailboxes with actors (allocated minus freed).
  uint64_t LiveCount() const;

 private:
  const uint32_t max_mailboxes_;
  // Value-initialized (null) chunk pointers; the vector itself never resizes.
  std::vector<std::atomic<Mailbox*>> chunks_;
  mutable troupe::Mutex mu_;
  // Freed hints, one list per kind.
  std::array<std::deque<uint32_t>, kMailboxKindCount> free_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint32_t> next_hint_{1};
  uint64_t allocated_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace troupe::internal
