// SPDX-License-Identifier: Apache-2.0
//
// Size-class pool for event handles and event objects (at most kMaxSize bytes).
//
// Events are allocated on the sending thread and freed on the receiving one; with glibc malloc
// that hand-off dominated fan-in (half the worker cycles went to _int_malloc / free on chunks the
// other core had just released). Each thread keeps two free lists per 16-byte size class: it
// allocates from the first, and frees into it until it holds kBatch blocks, then into the second,
// which goes whole to a global exchange once it holds kBatch too; an empty first list takes the
// second, or a batch from the exchange. Threads so trade memory under one lock per kBatch blocks,
// and a thread caches fewer than 2 * kBatch blocks per class. A free block links the block two
// ahead as well, which an allocation prefetches. What the exchange holds beyond
// kSmallAllocKeepBytes (a burst's worth of events, freed) goes back to the heap once no thread has
// traded through the exchange for kSmallAllocTrimDelay, by an idle worker (SmallAllocTrimStep,
// from ExecutorPool's idle path), and the heap's free pages to the system: a node that absorbed a
// burst does not keep its peak.
//
// ASan builds bypass the pool (plain operator new/delete) so use-after-free stays detectable.
//
// Thread-safety: thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>

#include "absl/time/time.h"

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
void* SmallAllocate(size_t size);
// Frees a block from SmallAllocate; `size` must be the size it was allocated with.
void SmallFree(void* block, size_t size) noexcept;

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

}  // namespace troupe::internal
