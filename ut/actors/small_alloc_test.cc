// SPDX-License-Identifier: Apache-2.0
//
// The event pool (actors/internal/small_alloc.h) gives what a burst left over back: blocks freed on
// one thread after another allocated them pile up in the exchange, stay there while threads still
// trade blocks, and then SmallAllocTrimStep frees all but kSmallAllocKeepBytes of them, in bounded
// steps, while the pool still serves.
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

// A block the size of a handle and its event (a handle is 64 bytes, its event 16 to 32).
constexpr size_t kBlock = 96;

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

}  // namespace
}  // namespace troupe::internal
