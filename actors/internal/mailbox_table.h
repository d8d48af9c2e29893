// SPDX-License-Identifier: Apache-2.0
//
// The node's mailboxes, indexed by hint. Chunks of mailboxes are allocated on demand and never
// move or disappear until the table is destroyed, so a sender holding any hint may always push to
// the mailbox (a stale event is then reported undelivered by the reader, because local ids are
// never reused). Freed hints are reused through a free list per kind; a worker thread keeps a few
// in a HintCache of its own, so that spawning and ending actors takes the table's mutex only once
// per kHintBatch of them.
//
// Thread-safety: Get is lock-free and thread-safe; Allocate and Free take an internal mutex unless
// the caller's cache serves them. A HintCache belongs to one thread.
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

  // Freed hints held by one thread, per kind (see the file comment).
  struct HintCache {
    std::array<std::vector<uint32_t>, kMailboxKindCount> free;
    // Mailboxes allocated minus freed through this cache: written by its thread only (a shared
    // counter was a third of the cost of spawning on two workers), read by other threads.
    std::atomic<int64_t> live{0};
  };
  static constexpr size_t kHintBatch = 32;

  // Returns a mailbox of `kind` (not kPoolDefault) in kScheduled state owned by the caller, with no
  // actors, and its hint; or {nullptr, 0} when the table is full. A freed mailbox of the same kind
  // is reused first (from `cache` when given); a mailbox never changes kind.
  std::pair<Mailbox*, uint32_t> Allocate(MailboxKind kind = MailboxKind::kLockFree,
                                         HintCache* cache = nullptr);

  // Returns `hint` to its kind's free list, or to `cache` (its mailbox must have no actors).
  void Free(uint32_t hint, HintCache* cache = nullptr);

  // Returns one past the largest hint ever handed out.
  uint32_t HighWater() const { return next_hint_.load(std::memory_order_acquire); }

  // Returns the number of mailboxes with actors (allocated minus freed) not counted by a
  // HintCache; add each cache's `live` for the total.
  // acquire: pairs with the release of a Free (see CountOwned in the .cc).
  int64_t LiveCountOutsideCaches() const { return live_.load(std::memory_order_acquire); }

 private:
  const uint32_t max_mailboxes_;
  // Value-initialized (null) chunk pointers; the vector itself never resizes.
  std::vector<std::atomic<Mailbox*>> chunks_;
  mutable troupe::Mutex mu_;
  // Freed hints, one list per kind.
  std::array<std::deque<uint32_t>, kMailboxKindCount> free_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint32_t> next_hint_{1};
  // Allocated minus freed.
  std::atomic<int64_t> live_{0};
};

}  // namespace troupe::internal
