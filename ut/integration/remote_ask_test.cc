// SPDX-License-Identifier: Apache-2.0
//
// Asks across nodes over loopback TCP: a thread on node 1 asks a service on node 2 and gets the
// typed reply; a request to a service node 2 does not have comes back Unavailable; an ask to a
// node that has stopped ends (Unavailable or DeadlineExceeded), never hangs; a ScopedActor on
// node 1 gets the replies of node 2 at its own id.
#include <cstdint>
#include <future>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/actor.h"
#include "actors/actor_id.h"
#include "actors/scoped_actor.h"
#include "interconnect/node.h"
#include "ut/actors/test_util.h"
#include "ut/integration/node_util.h"
#include "ut/interconnect/ic_test_util.h"

namespace troupe {
namespace {

using testutil::EvIcData;
using testutil::MakeData;
using testutil::StartNode;

// Answers EvIcData{seq} with EvIcData{seq + 1}.
class Incrementer final : public Actor {
 public:
  Incrementer() : Actor(&Incrementer::StateWork) {}

 private:
  TROUPE_STATE(StateWork) {
    switch (ev->type()) {
      TROUPE_HFUNC(EvIcData, Handle);
      default:
        Unhandled(ev);
    }
  }
  void Handle(EventPtr<EvIcData> ev) { Reply(ev, MakeData(ev.Get()->record.seq() + 1)); }
};

TEST(RemoteAskTest, AThreadAsksAServiceOnAnotherNode) {
  testutil::LoopbackPorts ports(2);
  std::unique_ptr<Node> one = StartNode(ports.ConfigFor(1, "ask"));
  std::unique_ptr<Node> two = StartNode(ports.ConfigFor(2, "ask"));
  ASSERT_NE(one, nullptr);
  ASSERT_NE(two, nullptr);
  ASSERT_TRUE(two->system()
                  .RegisterService(ServiceId("inc"),
                                   two->system().Register(std::make_unique<Incrementer>()))
                  .ok());
  ASSERT_TRUE(one->WaitForPeer(2, testutil::WaitTimeout()).ok());

  absl::StatusOr<std::unique_ptr<EvIcData>> reply =
      Ask<EvIcData>(one->system(), ServiceId("inc", 2), MakeData(7), testutil::WaitTimeout()).get();
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ((*reply)->record.seq(), 8u);

  std::vector<std::future<absl::StatusOr<std::unique_ptr<EvIcData>>>> many;
  for (uint64_t i = 0; i < 200; ++i) {
    many.push_back(
        Ask<EvIcData>(one->system(), ServiceId("inc", 2), MakeData(i), testutil::WaitTimeout()));
  }
  for (uint64_t i = 0; i < 200; ++i) {
    absl::StatusOr<std::unique_ptr<EvIcData>> got = many[i].get();
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ((*got)->record.seq(), i + 1);
  }

  reply = Ask<EvIcData>(one->system(), ServiceId("nobody", 2), MakeData(1), testutil::WaitTimeout())
              .get();
  EXPECT_EQ(reply.status().code(), absl::StatusCode::kUnavailable) << reply.status();
  EXPECT_TRUE(absl::StrContains(reply.status().message(), "unknown-service")) << reply.status();

  // A ScopedActor's id is reachable from node 2.
  {
    ScopedActor me(one->system());
    me.Send(ServiceId("inc", 2), MakeData(41), kNoFlags, 5);
    EventHandlePtr answer = me.Receive(testutil::WaitTimeout());
    ASSERT_NE(answer, nullptr);
    ASSERT_NE(answer->Get<EvIcData>(), nullptr);
    EXPECT_EQ(answer->Get<EvIcData>()->record.seq(), 42u);
    EXPECT_EQ(answer->cookie(), 5u);
  }

  two->Shutdown(absl::Seconds(5));
  reply = Ask<EvIcData>(one->system(), ServiceId("inc", 2), MakeData(1), absl::Seconds(20)).get();
  EXPECT_FALSE(reply.ok());
  EXPECT_TRUE(reply.status().code() == absl::StatusCode::kUnavailable ||
              reply.status().code() == absl::StatusCode::kDeadlineExceeded)
      << reply.status();
}

}  // namespace
}  // namespace troupe
