// SPDX-License-Identifier: Apache-2.0
#include "actors/internal/mailbox_table.h"

#include <algorithm>

#include "actors/check.h"

namespace troupe::internal {
namespace {

// Adds to a counter only its owning thread writes (no read-modify-write). release: a reader
// that sees a mailbox freed sees what its actors did before (tests wait on the live count).
void CountOwned(std::atomic<int64_t>& counter, int64_t n) {
  counter.store(counter.load(std::memory_order_relaxed) + n, std::memory_order_release);
}

}  // namespace

MailboxTable::MailboxTable(uint32_t max_mailboxes)
    : max_mailboxes_(std::min<uint64_t>(max_mailboxes, uint64_t{kChunkSize} * kMaxChunks - 1)),
      chunks_(kMaxChunks) {}

MailboxTable::~MailboxTable() {
  for (uint32_t i = 0; i < kMaxChunks; ++i) {
    delete[] chunks_[i].load(std::memory_order_relaxed);
  }
}

std::pair<Mailbox*, uint32_t> MailboxTable::Allocate(MailboxKind kind, HintCache* cache) {
  TROUPE_CHECK(kind != MailboxKind::kPoolDefault && static_cast<uint32_t>(kind) < kMailboxKindCount)
      << "Allocate needs a concrete mailbox kind, got " << static_cast<int>(kind);
  const auto k = static_cast<uint32_t>(kind);
  if (cache != nullptr) {
    std::vector<uint32_t>& mine = cache->free[k];
    if (mine.empty()) {
      // Refill a batch from the shared list's oldest hints (the likeliest to be idle by now).
      troupe::MutexLock lock(&mu_);
      std::deque<uint32_t>& free = free_[k];
      while (mine.size() < kHintBatch && !free.empty()) {
        mine.push_back(free.front());
        free.pop_front();
      }
    }
    // A freed mailbox may still be running (a worker reporting stale events as undelivered): such
    // hints go back to the shared list, to be retried later rather than waited for.
    for (size_t tries = 0; tries < 4 && !mine.empty(); ++tries) {
      const uint32_t hint = mine.back();
      mine.pop_back();
      Mailbox* mailbox = Get(hint);
      if (mailbox->TryLock()) {
        CountOwned(cache->live, 1);
        return {mailbox, hint};
      }
      troupe::MutexLock lock(&mu_);
      free_[k].push_back(hint);
    }
  }
  troupe::MutexLock lock(&mu_);
  std::deque<uint32_t>& free = free_[k];
  for (size_t tries = 0; tries < 4 && !free.empty(); ++tries) {
    const uint32_t hint = free.back();
    free.pop_back();
    Mailbox* mailbox = Get(hint);
    if (mailbox->TryLock()) {
      live_.fetch_add(1, std::memory_order_relaxed);
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
  live_.fetch_add(1, std::memory_order_relaxed);
  return {mailbox, hint};
}

void MailboxTable::Free(uint32_t hint, HintCache* cache) {
  const auto k = static_cast<uint32_t>(Get(hint)->kind());
  if (cache != nullptr) {
    CountOwned(cache->live, -1);
    std::vector<uint32_t>& mine = cache->free[k];
    mine.push_back(hint);
    if (mine.size() < 2 * kHintBatch) {
      return;
    }
    // Spill the oldest batch to the shared list, for other threads.
    troupe::MutexLock lock(&mu_);
    free_[k].insert(free_[k].end(), mine.begin(), mine.begin() + kHintBatch);
    mine.erase(mine.begin(), mine.begin() + kHintBatch);
    return;
  }
  live_.fetch_sub(1, std::memory_order_release);
  troupe::MutexLock lock(&mu_);
  free_[k].push_back(hint);
}

}  // namespace troupe::internal
