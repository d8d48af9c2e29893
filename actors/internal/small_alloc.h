// SPDX-License-Identifier: Apache-2.0
//
// Size-class pool for event handles and event objects (at most kMaxSize bytes).
//
// Events are allocated on the sending thread and freed on the receiving one; with glibc malloc
// that hand-off dominated fan-in (half the worker cycles went to _int_malloc / free on chunks the
// other core had just released). Each thread keeps a free list per 16-byte size class; a list that
// grows past kCacheLimit hands a batch of kBatch blocks to a global exchange, and an empty one
// takes a batch from there, so threads trade memory under one lock per kBatch blocks. Blocks are
// never returned to malloc: the pool's size is the peak number of events alive at once.
//
// ASan builds bypass the pool (plain operator new/delete) so use-after-free stays detectable.
//
// Thread-safety: thread-safe.
#pragma once

#include <cstddef>
#include <new>

namespace troupe::internal {

inline constexpr size_t kSmallAllocMaxSize = 256;

// Returns a block of at least `size` bytes aligned to 16.
void* SmallAllocate(size_t size);
// Frees a block from SmallAllocate; `size` must be the size it was allocated with.
void SmallFree(void* block, size_t size) noexcept;

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
