// SPDX-License-Identifier: Apache-2.0
//
// Size-class pool for event handles and event objects (at most kMaxSize bytes).
//
// Events are allocated on the sending thread and freed on the receiving one; with glibc malloc
// that hand-off dominated fan-in (half the worker cycles went to _int_malloc / free on chunks the
// other core had just released). Each thread keeps two free lists per size class: it
// allocates from the first, and frees into it until it holds kSmallAllocBatch blocks, then into
// the second (the spill list), which goes whole to a global exchange once it holds
// kSmallAllocBatch too; an empty first list takes the second, or a batch from the exchange, or
// else one new block from the heap. Threads so trade memory under one lock per batch, and a
// thread caches fewer than 2 * kSmallAllocBatch blocks per class. A free block links the block
// two ahead as well, which an allocation prefetches. What the exchange holds beyond
// kSmallAllocKeepBytes (a burst's worth of events, freed) goes back to the heap once no thread has
// traded through the exchange for kSmallAllocTrimDelay, by an idle worker (SmallAllocTrimStep,
// from ExecutorPool's idle path), and the heap's free pages to the system: a node that absorbed a
// burst does not keep its peak.
//
// SmallAllocate and SmallFree are inline: taking a block from the allocation list, or giving one
// to either list, is a few instructions on a thread-local that needs no initialization guard,
// compiled into each `new` and `delete` of a pooled type (the size, and so the class, is then a
// constant). A thread that only frees (a fan-in's receiver) so leaves the inline path once per
// batch, to hand its spill list on. All else (refill, the exchange, a thread's first use of the
// pool and its end) is out of line.
//
// ASan builds bypass the pool (plain operator new/delete) so use-after-free stays detectable.
//
// Thread-safety: thread-safe.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <new>

#include "absl/time/time.h"

#if defined(__SANITIZE_ADDRESS__)
#define TROUPE_SMALL_ALLOC_BYPASS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TROUPE_SMALL_ALLOC_BYPASS 1
#endif
#endif

namespace troupe::internal {

inline constexpr size_t kSmallAllocMaxSize = 256;
// Free blocks the exchange keeps for the next burst (more than credit-based traffic keeps in
// flight); the rest goes back once the workers are idle.
inline constexpr size_t kSmallAllocKeepBytes = size_t{4} << 20;
// How long no thread may have traded blocks through the exchange before its surplus goes back:
// a node that runs burst after burst (a benchmark's iterations, a batch job's rounds) keeps its
// memory between them instead of faulting it in again each time.
inline constexpr absl::Duration kSmallAllocTrimDelay = absl::Milliseconds(200);

// Returns a block of at least `size` bytes aligned to 16.
inline void* SmallAllocate(size_t size);
// Frees a block from SmallAllocate; `size` must be the size it was allocated with.
inline void SmallFree(void* block, size_t size) noexcept;

// Returns -1 when the exchange holds nothing to give back (or another thread is at it), else the
// nanoseconds until it may: kSmallAllocTrimDelay after the last batch traded. A worker about to
// park with a surplus pending wakes after that long (ExecutorPool's idle path).
int64_t SmallAllocTrimDelayNanos();
// When a trim is due (SmallAllocTrimDelayNanos() == 0), frees part of what the exchange holds
// beyond kSmallAllocKeepBytes (about a millisecond's worth) to operator delete; once nothing is
// left over, returns the heap's free pages to the system (glibc's malloc_trim). Returns true when
// there is more to free: an idle worker calls it until false or until work arrives. One thread
// trims at a time; the others get false at once.
bool SmallAllocTrimStep();
// Bytes of free blocks the exchange holds (0 in ASan builds, which bypass the pool).
size_t SmallAllocPooledBytes();

// A base class (empty: no size cost) whose objects, and those of classes derived from it, come
// from the pool. Deleting through a base with a virtual destructor passes the derived size.
// Over-aligned types use the global allocator.
class SmallPooled {
 public:
  static void* operator new(size_t size) { return SmallAllocate(size); }
  static void operator delete(void* block, size_t size) noexcept { SmallFree(block, size); }
  static void* operator new(size_t size, std::align_val_t align) {
    return ::operator new(size, align);
  }
  static void operator delete(void* block, size_t /*size*/, std::align_val_t align) noexcept {
    ::operator delete(block, align);
  }
};

// -- implementation ---------------------------------------------------------------------------

// The classes are 24, 40, 56, ... 264 bytes: 16 apart, each 8 short of a multiple of 16. A block
// fresh from glibc's heap, a request of n bytes, takes a chunk of n + 8 bytes (its size field)
// rounded up to 16; the next chunk's other header field lies in this one's last 8 bytes while it
// is in use. A class of 16k + 8 bytes so costs the same chunk as one of 16k: an 88-byte object
// takes a 96-byte chunk, not the 112 of a 96-byte class.
inline constexpr size_t kSmallAllocGranule = 16;
inline constexpr size_t kSmallAllocMinClassSize = 24;

constexpr size_t SmallAllocClassOf(size_t size) {
  return size <= kSmallAllocMinClassSize
             ? 0
             : (size - kSmallAllocMinClassSize - 1) / kSmallAllocGranule + 1;
}
constexpr size_t SmallAllocClassSize(size_t cls) {
  return kSmallAllocMinClassSize + cls * kSmallAllocGranule;
}
inline constexpr size_t kSmallAllocClasses = SmallAllocClassOf(kSmallAllocMaxSize) + 1;
static_assert(SmallAllocClassSize(kSmallAllocClasses - 1) >= kSmallAllocMaxSize);
static_assert(SmallAllocClassOf(SmallAllocClassSize(1)) == 1 &&
              SmallAllocClassOf(SmallAllocClassSize(1) + 1) == 2 && SmallAllocClassOf(1) == 0);
// Blocks per list, and per batch traded through the exchange.
inline constexpr uint32_t kSmallAllocBatch = 256;

// A free block's links.
struct SmallFreeBlock {
  SmallFreeBlock* next;
  // The block that followed `next` when this one was freed, for an allocation to prefetch two
  // blocks ahead. A hint only: it may be stale (that block moved on), and is never followed.
  SmallFreeBlock* after_next;
};

// One class's lists on a thread: the allocation list and the spill list, and how many more blocks
// each takes (the spill list goes to the exchange when it would reach none).
struct SmallFreeList {
  SmallFreeBlock* head;
  SmallFreeBlock* spill;
  uint32_t room;
  uint32_t spill_room;
};

// A thread's lists, one pair per class. All zero (no block, no room) until the thread's first
// slow-path call sets them up, and again once its cache is gone at thread exit: both inline paths
// then go out of line.
struct SmallThreadLists {
  std::array<SmallFreeList, kSmallAllocClasses> lists;
};
inline constinit thread_local SmallThreadLists tls_small_lists{};

void* SmallAllocateSlow(size_t size);
void SmallFreeSlow(void* block, size_t size) noexcept;

// Makes `block` the head of the free list at `head`, recording the block after the old head for
// the prefetch. The old head is mostly the block this thread freed last: its line is at hand.
inline void SmallPushFront(SmallFreeBlock*& head, void* block) {
  auto* free_block = static_cast<SmallFreeBlock*>(block);
  free_block->next = head;
  free_block->after_next = head != nullptr ? head->next : nullptr;
  head = free_block;
}

inline void* SmallAllocate(size_t size) {
#ifdef TROUPE_SMALL_ALLOC_BYPASS
  return ::operator new(size);
#else
  if (size <= kSmallAllocMaxSize) [[likely]] {
    SmallFreeList& list = tls_small_lists.lists[SmallAllocClassOf(size)];
    if (SmallFreeBlock* block = list.head; block != nullptr) [[likely]] {
      list.head = block->next;
      ++list.room;
      // Blocks were mostly freed by another thread (events are freed where they are handled),
      // so each would cost this thread a miss. This block was prefetched two allocations ago;
      // start pulling the one two allocations ahead. For reading: a prefetch for writing would
      // take the line from a core still using a live neighbour on it.
      __builtin_prefetch(block->after_next, 0);
      return block;
    }
  }
  return SmallAllocateSlow(size);
#endif
}

inline void SmallFree(void* block, size_t size) noexcept {
#ifdef TROUPE_SMALL_ALLOC_BYPASS
  static_cast<void>(size);
  ::operator delete(block);
#else
  if (size <= kSmallAllocMaxSize) [[likely]] {
    SmallFreeList& list = tls_small_lists.lists[SmallAllocClassOf(size)];
    if (list.room != 0) [[likely]] {
      SmallPushFront(list.head, block);
      --list.room;
      return;
    }
    // The allocation list is full: the spill list takes the block, unless it is the one that
    // completes the spill list's batch (the exchange, out of line).
    if (list.spill_room > 1) [[likely]] {
      SmallPushFront(list.spill, block);
      --list.spill_room;
      return;
    }
  }
  SmallFreeSlow(block, size);
#endif
}

}  // namespace troupe::internal
