// SPDX-License-Identifier: Apache-2.0
#include "actors/internal/small_alloc.h"

#include <array>
#include <cstdint>
#include <new>
#include <vector>

#include "actors/sync.h"

#if defined(__SANITIZE_ADDRESS__)
#define TROUPE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TROUPE_ASAN 1
#endif
#endif

namespace troupe::internal {

#ifndef TROUPE_ASAN
namespace {

constexpr size_t kGranule = 16;
constexpr size_t kClasses = kSmallAllocMaxSize / kGranule;
constexpr uint32_t kBatch = 256;
constexpr uint32_t kCacheLimit = 2 * kBatch;

struct FreeBlock {
  FreeBlock* next;
};

size_t ClassOf(size_t size) { return size == 0 ? 0 : (size - 1) / kGranule; }
size_t ClassSize(size_t cls) { return (cls + 1) * kGranule; }

// Batches of exactly kBatch linked blocks per class, traded between threads.
class Exchange {
 public:
  void Put(size_t cls, FreeBlock* batch) {
    MutexLock lock(&mu_);
    batches_[cls].push_back(batch);
  }
  FreeBlock* Take(size_t cls) {
    MutexLock lock(&mu_);
    if (batches_[cls].empty()) {
      return nullptr;
    }
    FreeBlock* batch = batches_[cls].back();
    batches_[cls].pop_back();
    return batch;
  }

 private:
  Mutex mu_;
  std::array<std::vector<FreeBlock*>, kClasses> batches_ ABSL_GUARDED_BY(mu_);
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

class ThreadCache {
 public:
  ThreadCache() = default;
  ThreadCache(const ThreadCache&) = delete;
  ThreadCache& operator=(const ThreadCache&) = delete;
  ThreadCache(ThreadCache&&) = delete;
  ThreadCache& operator=(ThreadCache&&) = delete;

  ~ThreadCache() {
    tls_cache_dead = true;
    // Full batches go to the exchange; the remainder back to the heap.
    for (size_t cls = 0; cls < kClasses; ++cls) {
      while (counts_[cls] >= kBatch) {
        GlobalExchange().Put(cls, Detach(cls));
      }
      while (FreeBlock* block = lists_[cls]) {
        lists_[cls] = block->next;
        ::operator delete(block);
      }
      counts_[cls] = 0;
    }
  }

  void* Allocate(size_t cls) {
    FreeBlock* block = lists_[cls];
    if (block == nullptr) {
      block = GlobalExchange().Take(cls);
      if (block == nullptr) {
        return ::operator new(ClassSize(cls));
      }
      counts_[cls] = kBatch;
    }
    lists_[cls] = block->next;
    --counts_[cls];
    return block;
  }

  void Free(void* memory, size_t cls) {
    auto* block = static_cast<FreeBlock*>(memory);
    block->next = lists_[cls];
    lists_[cls] = block;
    if (++counts_[cls] > kCacheLimit) {
      GlobalExchange().Put(cls, Detach(cls));
    }
  }

 private:
  // Unlinks the first kBatch blocks of a class (the list must hold at least that many).
  FreeBlock* Detach(size_t cls) {
    FreeBlock* batch = lists_[cls];
    FreeBlock* last = batch;
    for (uint32_t i = 1; i < kBatch; ++i) {
      last = last->next;
    }
    lists_[cls] = last->next;
    last->next = nullptr;
    counts_[cls] -= kBatch;
    return batch;
  }

  std::array<FreeBlock*, kClasses> lists_{};
  std::array<uint32_t, kClasses> counts_{};
};

ThreadCache& LocalCache() {
  thread_local ThreadCache cache;
  return cache;
}

}  // namespace
#endif  // TROUPE_ASAN

void* SmallAllocate(size_t size) {
#ifdef TROUPE_ASAN
  return ::operator new(size);
#else
  if (size > kSmallAllocMaxSize || tls_cache_dead) {
    return ::operator new(size);
  }
  return LocalCache().Allocate(ClassOf(size));
#endif
}

void SmallFree(void* block, size_t size) noexcept {
#ifdef TROUPE_ASAN
  ::operator delete(block);
#else
  if (size > kSmallAllocMaxSize || tls_cache_dead) {
    ::operator delete(block);
    return;
  }
  LocalCache().Free(block, ClassOf(size));
#endif
}

}  // namespace troupe::internal
