// SPDX-License-Identifier: Apache-2.0
//
// The event pool (actors/internal/small_alloc.h) gives what a burst left over back: blocks freed on
// one thread after another allocated them pile up in the exchange, stay there while threads still
// trade blocks, and then SmallAllocTrimStep frees all but kSmallAllocKeepBytes of them, in bounded
// steps, while the pool still serves. A thread's cache outlives no thread: at its end, full lists
// go to the exchange, and frees later in its exit go to the heap.
#include "actors/internal/small_alloc.h"

#include <cstddef>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "ut/actors/test_util.h"

namespace troupe::internal {
namespace {

// A block the size of a handle and its event (a handle is 64 bytes, its event 16 to 32), and a
// class's size, so that the pool's byte counts are multiples of it.
constexpr size_t kBlock = 88;
static_assert(SmallAllocClassSize(SmallAllocClassOf(kBlock)) == kBlock);

TEST(SmallAllocTest, EverySizeTakesTheSmallestClassThatHoldsIt) {
  for (size_t size = 1; size <= kSmallAllocMaxSize; ++size) {
    const size_t cls = SmallAllocClassOf(size);
    ASSERT_LT(cls, kSmallAllocClasses) << "size " << size;
    ASSERT_GE(SmallAllocClassSize(cls), size) << "size " << size;
    if (cls > 0) {
      ASSERT_LT(SmallAllocClassSize(cls - 1), size) << "size " << size;
    }
    // Each class is 8 short of a multiple of 16: what a glibc chunk holds for its header's 8.
    ASSERT_EQ(SmallAllocClassSize(cls) % 16, 8u) << "size " << size;
  }
  EXPECT_EQ(SmallAllocClassSize(0), 24u);  // a free block's two links, and an 8-byte event
}

TEST(SmallAllocTest, AnIdleTrimGivesBackWhatABurstLeftOverAndKeepsTheRest) {
  if (testutil::kUnderAsan) {
    GTEST_SKIP() << "ASan builds bypass the pool (plain operator new and delete)";
  }
  // 64 MiB of blocks allocated on one thread and freed on this one, as events are.
  const size_t count = static_cast<size_t>(testutil::Scaled(700'000, 100'000));
  std::vector<void*> blocks(count);
  std::thread sender([&] {
    for (void*& block : blocks) {
      block = SmallAllocate(kBlock);
    }
  });
  sender.join();
  const size_t pooled_before = SmallAllocPooledBytes();
  for (void* block : blocks) {
    SmallFree(block, kBlock);
  }
  // All but this thread's own bounded cache went to the exchange.
  const size_t pooled = SmallAllocPooledBytes();
  ASSERT_GT(pooled, pooled_before + count * kBlock / 2);

  // Right after the burst the memory stays, for a next burst that may come at once.
  EXPECT_GT(SmallAllocTrimDelayNanos(), 0);
  EXPECT_FALSE(SmallAllocTrimStep());
  EXPECT_EQ(SmallAllocPooledBytes(), pooled);
  absl::SleepFor(kSmallAllocTrimDelay + absl::Milliseconds(20));
  EXPECT_EQ(SmallAllocTrimDelayNanos(), 0);

  // Each step frees a bounded part; idle workers of other tests' nodes may trim at the same time.
  int steps = 0;
  while (SmallAllocPooledBytes() > kSmallAllocKeepBytes && steps < 100'000) {
    SmallAllocTrimStep();
    ++steps;
  }
  EXPECT_LE(SmallAllocPooledBytes(), kSmallAllocKeepBytes);
  EXPECT_GT(steps, 1) << "one step freed everything: the idle path would not notice new work";
  EXPECT_FALSE(SmallAllocTrimStep()) << "nothing left over, yet the trim asks to be called again";

  // The pool still serves, from what it kept and from the heap.
  for (void*& block : blocks) {
    block = SmallAllocate(kBlock);
  }
  for (void* block : blocks) {
    SmallFree(block, kBlock);
  }
}

// Frees a block from a thread-local destructor, which runs after the thread's pool cache is gone
// when this holder was constructed before the cache.
struct LateFree {
  LateFree() = default;
  LateFree(const LateFree&) = delete;
  LateFree& operator=(const LateFree&) = delete;
  LateFree(LateFree&&) = delete;
  LateFree& operator=(LateFree&&) = delete;
  ~LateFree() {
    if (block != nullptr) {
      SmallFree(block, kBlock);
    }
  }
  void* block = nullptr;
};

TEST(SmallAllocTest, AThreadsCacheGoesToTheExchangeWhenItEndsAndLaterFreesToTheHeap) {
  if (testutil::kUnderAsan) {
    GTEST_SKIP() << "ASan builds bypass the pool (plain operator new and delete)";
  }
  // Four batches allocated here and freed by a thread that never used the pool before: its first
  // free sets its cache up, its allocation list fills, the next three batches go to the exchange
  // as its spill list fills, and the thread's end hands the full allocation list on as well.
  constexpr size_t kCount = size_t{4} * kSmallAllocBatch;
  std::vector<void*> blocks(kCount);
  for (void*& block : blocks) {
    block = SmallAllocate(kBlock);
  }
  void* late_block = SmallAllocate(kBlock);
  const size_t pooled_before = SmallAllocPooledBytes();
  std::thread freer([&] {
    // Constructed before the cache, so destroyed after it: its free finds the cache gone and goes
    // to the heap, not to a list nobody will empty.
    thread_local LateFree late;
    late.block = late_block;
    for (void* block : blocks) {
      SmallFree(block, kBlock);
    }
  });
  freer.join();
  EXPECT_EQ(SmallAllocPooledBytes(), pooled_before + kCount * kBlock)
      << "the thread's cache kept or lost blocks at its end";
}

}  // namespace
}  // namespace troupe::internal
