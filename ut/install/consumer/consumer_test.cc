// SPDX-License-Identifier: Apache-2.0
//
// A user's test of their own actor with the installed troupe::testing: deterministic dispatch and
// simulated time, no sleeping.
#include <memory>

#include "gtest/gtest.h"

#include "actors/actor.h"
#include "actors/testing/test_runtime.h"

namespace {

enum : troupe::EventType { kEvArm = troupe::EventSpaceBegin(troupe::kUserEventSpace) };
struct EvArm : troupe::EventLocal<EvArm, kEvArm> {};

// Answers EvArm with a wakeup to the sender five seconds later.
class Alarm : public troupe::Actor {
 public:
  Alarm() : Actor(&Alarm::StateWork) {}

 private:
  TROUPE_STATE(StateWork) {
    if (ev->type() == kEvArm) {
      Schedule(absl::Seconds(5), ev->sender(), std::make_unique<troupe::EvWakeup>(1));
    }
  }
};

TEST(ConsumerTest, AlarmRingsAfterFiveSimulatedSeconds) {
  troupe::testing::TestRuntime runtime;
  const absl::Time start = runtime.Now();
  const troupe::ActorId alarm = runtime.Register(std::make_unique<Alarm>());
  const troupe::ActorId edge = runtime.AllocateEdgeActor();
  runtime.Send(alarm, std::make_unique<EvArm>(), edge);
  auto wakeup = runtime.GrabEdgeEvent<troupe::EvWakeup>(edge);
  ASSERT_TRUE(wakeup);
  EXPECT_EQ(wakeup->tag, 1u);
  EXPECT_EQ(runtime.Now() - start, absl::Seconds(5));
}

}  // namespace
