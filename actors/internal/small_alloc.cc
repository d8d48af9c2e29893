// SPDX-License-Identifier: Apache-2.0
#include "actors/internal/small_alloc.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <new>
#include <utility>
#include <vector>

#include "actors/sync.h"

namespace troupe::internal {

#ifndef TROUPE_SMALL_ALLOC_BYPASS
namespace {

constexpr size_t kClasses = kSmallAllocClasses;
constexpr uint32_t kBatch = kSmallAllocBatch;

using FreeBlock = SmallFreeBlock;
static_assert(sizeof(FreeBlock) <= kSmallAllocMinClassSize,
              "the smallest class holds a free block's links");

int64_t NowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

size_t ClassOf(size_t size) { return SmallAllocClassOf(size); }
size_t ClassSize(size_t cls) { return SmallAllocClassSize(cls); }

// Batches of exactly kBatch linked blocks per class, traded between threads. What it holds beyond
// kSmallAllocKeepBytes after a burst goes back to the heap through Trim, called by idle workers.
class Exchange {
 public:
  void Put(size_t cls, FreeBlock* batch) {
    MutexLock lock(&mu_);
    batches_[cls].push_back(batch);
    SetCount(cls);
    AddBytes(static_cast<int64_t>(kBatch * ClassSize(cls)));
    Touch();
  }
  FreeBlock* Take(size_t cls) {
    // A sender that outruns its receivers finds the exchange empty on every refill: no lock then.
    // relaxed: a hint (SetCount stores it under mu_); a batch put meanwhile and not yet seen costs
    // one block from the heap.
    if (counts_[cls].load(std::memory_order_relaxed) == 0) {
      return nullptr;
    }
    MutexLock lock(&mu_);
    if (batches_[cls].empty()) {
      return nullptr;
    }
    FreeBlock* batch = batches_[cls].back();
    batches_[cls].pop_back();
    SetCount(cls);
    AddBytes(-static_cast<int64_t>(kBatch * ClassSize(cls)));
    Touch();
    return batch;
  }

  // Bytes of the blocks held (a relaxed read: a hint for the idle path).
  size_t bytes() const { return bytes_.load(std::memory_order_relaxed); }
  // NowNanos of the last Put or Take: the threads still trade memory while it is recent.
  int64_t last_trade_ns() const { return last_trade_ns_.load(std::memory_order_relaxed); }

  // Frees up to `max_batches` batches beyond `keep` bytes (largest classes first) to operator
  // delete, outside the lock. Returns the bytes freed.
  size_t Trim(size_t keep, size_t max_batches) {
    std::vector<std::pair<size_t, FreeBlock*>> surplus;
    {
      MutexLock lock(&mu_);
      for (size_t cls = kClasses; cls-- > 0 && surplus.size() < max_batches;) {
        while (bytes() > keep && !batches_[cls].empty() && surplus.size() < max_batches) {
          surplus.emplace_back(cls, batches_[cls].back());
          batches_[cls].pop_back();
          SetCount(cls);
          AddBytes(-static_cast<int64_t>(kBatch * ClassSize(cls)));
        }
      }
    }
    size_t freed = 0;
    for (const auto& [cls, batch] : surplus) {
      for (FreeBlock* block = batch; block != nullptr;) {
        FreeBlock* next = block->next;
        ::operator delete(block);
        block = next;
      }
      freed += kBatch * ClassSize(cls);
    }
    return freed;
  }

 private:
  void SetCount(size_t cls) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    // relaxed: Take reads it as a hint before it locks mu_, which orders the batches themselves.
    counts_[cls].store(static_cast<uint32_t>(batches_[cls].size()), std::memory_order_relaxed);
  }
  void AddBytes(int64_t delta) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    bytes_.store(static_cast<size_t>(static_cast<int64_t>(bytes()) + delta),
                 std::memory_order_relaxed);
  }

  // One clock read per kBatch blocks traded.
  void Touch() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    last_trade_ns_.store(NowNanos(), std::memory_order_relaxed);
  }

  Mutex mu_;
  std::array<std::vector<FreeBlock*>, kClasses> batches_ ABSL_GUARDED_BY(mu_);
  // Written under mu_, read anywhere. Per class, the batches held.
  std::array<std::atomic<uint32_t>, kClasses> counts_{};
  std::atomic<size_t> bytes_{0};
  std::atomic<int64_t> last_trade_ns_{0};
};

// Never destroyed: threads may free blocks during static destruction. Reachable through this
// pointer, so leak checkers do not report the pooled blocks.
Exchange& GlobalExchange() {
  static auto* exchange = new Exchange();
  return *exchange;
}

// Set once this thread's cache is destroyed: later frees (other thread-local or static
// destructors) go straight to operator delete, which is where every pooled block came from.
thread_local bool tls_cache_dead = false;

// The out-of-line half of a thread's cache: the setup and flush of its lists (tls_small_lists,
// which the inline paths use), and what the inline paths leave to it. Constructed on the thread's
// first slow-path call, destroyed at thread exit.
class ThreadCache {
 public:
  ThreadCache() {
    for (SmallFreeList& list : tls_small_lists.lists) {
      list = SmallFreeList{.head = nullptr, .spill = nullptr, .room = kBatch, .spill_room = kBatch};
    }
  }
  ThreadCache(const ThreadCache&) = delete;
  ThreadCache& operator=(const ThreadCache&) = delete;
  ThreadCache(ThreadCache&&) = delete;
  ThreadCache& operator=(ThreadCache&&) = delete;

  ~ThreadCache() {
    tls_cache_dead = true;
    // A full list goes to the exchange as a batch; the rest back to the heap. The lists are left
    // with no block and no room, so later calls on this thread come here (and find
    // tls_cache_dead).
    for (size_t cls = 0; cls < kClasses; ++cls) {
      SmallFreeList& list = tls_small_lists.lists[cls];
      Flush(cls, list.head, kBatch - list.room);
      Flush(cls, list.spill, kBatch - list.spill_room);
      list = SmallFreeList{};
    }
  }

  // The allocation list of `cls` is empty.
  void* Allocate(size_t cls) {
    if (!Refill(cls)) {
      return ::operator new(ClassSize(cls));
    }
    return SmallAllocate(ClassSize(cls));
  }

  // The allocation list of `cls` is full: the spill list takes the block, and goes to the
  // exchange whole once it holds a batch. No list is ever walked to cut a batch off.
  void Free(void* block, size_t cls) {
    SmallFreeList& list = tls_small_lists.lists[cls];
    SmallPushFront(list.spill, block);
    if (--list.spill_room == 0) {
      GlobalExchange().Put(cls, list.spill);
      list.spill = nullptr;
      list.spill_room = kBatch;
    }
  }

 private:
  static void Flush(size_t cls, FreeBlock* head, uint32_t count) {
    if (count == kBatch) {
      GlobalExchange().Put(cls, head);
      return;
    }
    while (head != nullptr) {
      FreeBlock* next = head->next;
      ::operator delete(head);
      head = next;
    }
  }

  // Refills the empty allocation list of `cls` from the spill list, or else with a batch from the
  // exchange. Returns false when neither has a block.
  //
  // The heap's blocks are taken one at a time (by Allocate), not in runs: blocks taken together
  // lie side by side. Tried: a thread that had taken 256 blocks of a class from the heap in a row
  // took 32 at once. The unbounded fan-in ran 1.04 faster than without, but a drained burst's
  // memory came back in 1.1 s instead of 0.75 s (glibc's malloc_consolidate took twice the time on
  // them), and taking 32 at once from the start ran 4-pair ping-pong at 0.65: its few long-lived
  // events and actors shared cache lines while different cores wrote them.
  static bool Refill(size_t cls) {
    SmallFreeList& list = tls_small_lists.lists[cls];
    if (list.spill != nullptr) {
      list.head = std::exchange(list.spill, nullptr);
      list.room = std::exchange(list.spill_room, kBatch);
      return true;
    }
    FreeBlock* batch = GlobalExchange().Take(cls);
    if (batch == nullptr) {
      return false;
    }
    list.head = batch;
    list.room = 0;
    return true;
  }
};

ThreadCache& LocalCache() {
  thread_local ThreadCache cache;
  return cache;
}

// Batches one TrimStep frees: 32 x 256 blocks, about a millisecond of operator delete, so an idle
// worker that trims notices new work soon.
constexpr size_t kTrimStepBatches = 32;

// One trimmer at a time; the others park at once.
std::atomic<bool> g_trimming{false};
// Bytes given back to operator delete since the last malloc_trim (written under g_trimming).
std::atomic<size_t> g_untrimmed{0};

}  // namespace
#endif  // TROUPE_SMALL_ALLOC_BYPASS

void* SmallAllocateSlow(size_t size) {
#ifdef TROUPE_SMALL_ALLOC_BYPASS
  return ::operator new(size);
#else
  if (size > kSmallAllocMaxSize || tls_cache_dead) {
    return ::operator new(size);
  }
  // The allocation list is empty (or the thread's lists are not set up yet: LocalCache does it).
  return LocalCache().Allocate(ClassOf(size));
#endif
}

void SmallFreeSlow(void* block, size_t size) noexcept {
#ifdef TROUPE_SMALL_ALLOC_BYPASS
  static_cast<void>(size);
  ::operator delete(block);
#else
  if (size > kSmallAllocMaxSize || tls_cache_dead) {
    ::operator delete(block);
    return;
  }
  ThreadCache& cache = LocalCache();
  if (tls_small_lists.lists[ClassOf(size)].room != 0) {
    SmallFree(block, size);  // the thread's first call: LocalCache has just set its lists up
    return;
  }
  cache.Free(block, ClassOf(size));
#endif
}

int64_t SmallAllocTrimDelayNanos() {
#ifdef TROUPE_SMALL_ALLOC_BYPASS
  return -1;
#else
  const Exchange& exchange = GlobalExchange();
  if ((exchange.bytes() <= kSmallAllocKeepBytes &&
       g_untrimmed.load(std::memory_order_relaxed) == 0) ||
      g_trimming.load(std::memory_order_relaxed)) {
    return -1;  // the idle path's usual answer: three relaxed loads
  }
  const int64_t due = exchange.last_trade_ns() + absl::ToInt64Nanoseconds(kSmallAllocTrimDelay);
  return std::max<int64_t>(0, due - NowNanos());
#endif
}

bool SmallAllocTrimStep() {
#ifdef TROUPE_SMALL_ALLOC_BYPASS
  return false;
#else
  if (SmallAllocTrimDelayNanos() != 0 || g_trimming.exchange(true, std::memory_order_acquire)) {
    return false;
  }
  Exchange& exchange = GlobalExchange();
  const size_t freed = exchange.Trim(kSmallAllocKeepBytes, kTrimStepBatches);
  const size_t untrimmed = g_untrimmed.load(std::memory_order_relaxed) + freed;
  const bool more = exchange.bytes() > kSmallAllocKeepBytes;
  if (more || untrimmed == 0) {
    g_untrimmed.store(untrimmed, std::memory_order_relaxed);
  } else {
    // The blocks are back in malloc's free lists; this gives their pages to the system.
#if defined(__GLIBC__)
    malloc_trim(0);
#endif
    g_untrimmed.store(0, std::memory_order_relaxed);
  }
  g_trimming.store(false, std::memory_order_release);
  return more;
#endif
}

size_t SmallAllocPooledBytes() {
#ifdef TROUPE_SMALL_ALLOC_BYPASS
  return 0;
#else
  return GlobalExchange().bytes();
#endif
}

}  // namespace troupe::internal
