// SPDX-License-Identifier: Apache-2.0
//
// A node gives back the memory of a burst: millions of small events queued at one actor, then
// drained, leave the resident set within 64 MiB of where it was once the workers are idle (the
// event pool's surplus goes back to the heap and the heap's free pages to the system).
//
// Label `timing` (actors_timing_ut, Release only): it reads the process's RSS and gives the node
// two seconds of idleness, a claim about the machine as much as about the code.
#include <cstdint>
#include <memory>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/actor.h"
#include "actors/actor_system.h"
#include "actors/event.h"
#include "actors/sync.h"
#include "bench/process_memory.h"
#include "ut/actors/test_util.h"

namespace troupe {
namespace {

enum : EventType {
  kEvHold = EventSpaceBegin(kUserEventSpace),
  kEvSmall,
};

// Holds the receiver's worker until `release`, so everything sent meanwhile queues.
struct EvHold : EventLocal<EvHold, kEvHold> {
  explicit EvHold(Notification* release_value) : release(release_value) {}
  Notification* release;
};
struct EvSmall : EventLocal<EvSmall, kEvSmall> {
  explicit EvSmall(uint64_t value_value) : value(value_value) {}
  uint64_t value;
};

// Counts EvSmall and notifies `drained` at the `expected`-th.
class Receiver : public Actor {
 public:
  Receiver(uint64_t expected, Notification* drained)
      : Actor(&Receiver::StateWork), expected_(expected), drained_(drained) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      case kEvHold:
        ev->Get<EvHold>()->release->WaitForNotification();
        break;
      case kEvSmall:
        if (++received_ == expected_) {
          drained_->Notify();
        }
        break;
      default:
        Unhandled(ev);
    }
  }

  const uint64_t expected_;
  Notification* const drained_;
  uint64_t received_ = 0;
};

TEST(MemoryReturnTest, ADrainedBurstGivesItsMemoryBackWhileTheWorkersIdle) {
  constexpr uint64_t kEvents = 4'000'000;  // about 450 MB queued
  constexpr int64_t kSlack = int64_t{64} << 20;
  auto system = testutil::MakeSystem();
  ASSERT_NE(system, nullptr);
  Notification release;
  Notification drained;
  const ActorId receiver = system->Register(std::make_unique<Receiver>(kEvents, &drained));
  bench::TrimHeap();
  const int64_t before = bench::ResidentBytes();
  ASSERT_GT(before, 0);

  system->Send(receiver, std::make_unique<EvHold>(&release));
  for (uint64_t i = 0; i < kEvents; ++i) {
    system->Send(receiver, std::make_unique<EvSmall>(i));
  }
  const int64_t queued = bench::ResidentBytes() - before;
  release.Notify();
  ASSERT_TRUE(drained.WaitForNotificationWithTimeout(testutil::WaitTimeout()));
  const absl::Time drained_at = absl::Now();
  EXPECT_GT(queued, 4 * kSlack) << "the burst did not show in the RSS: nothing to give back";

  // Nothing here trims: the idle workers must.
  int64_t above = bench::ResidentBytes() - before;
  while (above > kSlack && absl::Now() - drained_at < absl::Seconds(2)) {
    absl::SleepFor(absl::Milliseconds(10));
    above = bench::ResidentBytes() - before;
  }
  EXPECT_LE(above, kSlack) << "RSS still " << (above >> 20) << " MiB above its start "
                           << absl::Now() - drained_at << " after the drain (the burst queued "
                           << (queued >> 20) << " MiB)";
}

}  // namespace
}  // namespace troupe
