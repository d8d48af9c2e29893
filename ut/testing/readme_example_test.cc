// SPDX-License-Identifier: Apache-2.0
//
// The example of the README's "Testing your actors" section, compiled and run so it stays true.
#include <memory>

#include "gtest/gtest.h"

#include "actors/actor.h"
#include "actors/testing/actors.h"
#include "actors/testing/test_runtime.h"
#include "ut/actors/test_events.pb.h"

namespace {

enum : troupe::EventType { kEvPing = troupe::EventSpaceBegin(troupe::kUserEventSpace + 3) };
// A protobuf event, so it may cross nodes.
struct EvPing : troupe::EventPB<EvPing, troupe::ut::TestPayload, kEvPing> {
  EvPing() = default;
  explicit EvPing(uint64_t seq) { record.set_seq(seq); }
};

// Sends every EvPing back to its sender (the shared test actor of actors/testing/actors.h).
using Echo = troupe::testing::Echo<EvPing>;

// [doc-example: README.md]
TEST(EchoTest, RepliesAcrossNodesAndReportsAPartition) {
  troupe::testing::TestRuntime runtime({.nodes = 2});  // seeded; the seed is printed on failure
  troupe::ActorId echo = runtime.Register(std::make_unique<Echo>(), /*node=*/2);
  troupe::ActorId client = runtime.AllocateEdgeActor(/*node=*/1);
  runtime.Send(echo, std::make_unique<EvPing>(7), client);
  runtime.Expect<EvPing>().From(client).To(echo);     // the next event echo handles
  auto pong = runtime.GrabEdgeEvent<EvPing>(client);  // dispatches until one arrives
  ASSERT_TRUE(pong);
  EXPECT_EQ(pong->record.seq(), 7u);

  runtime.Partition(1, 2);  // fault injection
  runtime.Send(echo, std::make_unique<EvPing>(8), client, troupe::kTrackDelivery);
  auto lost = runtime.GrabEdgeEvent<troupe::EvUndelivered>(client);
  ASSERT_TRUE(lost);
  EXPECT_EQ(lost->reason, troupe::UndeliveredReason::kDisconnected);
}
// [end doc-example]

}  // namespace
