// SPDX-License-Identifier: Apache-2.0
//
// Asks across nodes over loopback TCP: a thread on node 1 asks a service on node 2 and gets the
// typed reply; a request to a service node 2 does not have comes back Unavailable; an ask to a
// node that has stopped ends (Unavailable or DeadlineExceeded), never hangs; a ScopedActor on
// node 1 gets the replies of node 2 at its own id. Watches across nodes: a watched service on
// node 2 that is poisoned is reported stopped, a target whose node shuts down node-left.
#include <cstdint>
#include <future>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

#include "actors/actor.h"
#include "actors/actor_id.h"
#include "actors/events.h"
#include "actors/scoped_actor.h"
#include "node/node.h"
#include "ut/actors/test_util.h"
#include "ut/integration/node_util.h"
#include "ut/interconnect/ic_test_util.h"

namespace troupe {
namespace {

using node::Node;
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

// Watches its targets and forwards each EvTerminated to `report_to`.
class WatchForwarder final : public Actor {
 public:
  WatchForwarder(std::vector<ActorId> targets, ActorId report_to)
      : Actor(&WatchForwarder::StateWork), targets_(std::move(targets)), report_to_(report_to) {}

 private:
  void Bootstrap() override {
    for (const ActorId& target : targets_) {
      Watch(target);
    }
  }
  TROUPE_STATE(StateWork) {
    if (ev->type() == kEvTerminated) {
      Forward(report_to_, ev);
    } else {
      Unhandled(ev);
    }
  }

  std::vector<ActorId> targets_;
  ActorId report_to_;
};

TEST(RemoteWatchTest, ARemoteTargetThatStopsAndOneWhoseNodeShutsDownAreEachReportedOnce) {
  testutil::LoopbackPorts ports(2);
  std::unique_ptr<Node> one = StartNode(ports.ConfigFor(1, "watch"));
  std::unique_ptr<Node> two = StartNode(ports.ConfigFor(2, "watch"));
  ASSERT_NE(one, nullptr);
  ASSERT_NE(two, nullptr);
  const ActorId victim = ServiceId("victim", 2);
  ASSERT_TRUE(two->system()
                  .RegisterService(victim, two->system().Register(std::make_unique<Incrementer>()))
                  .ok());
  const ActorId survivor = two->system().Register(std::make_unique<Incrementer>());
  ASSERT_TRUE(one->WaitForPeer(2, testutil::WaitTimeout()).ok());

  ScopedActor inbox(one->system());
  one->system().Register(
      std::make_unique<WatchForwarder>(std::vector<ActorId>{victim, survivor}, inbox.id()));
  // The watch is in place once a request sent after it was answered (same link, in order).
  ASSERT_TRUE(
      AskFuture<EvIcData>(one->system(), victim, MakeData(1), testutil::WaitTimeout()).get().ok());
  one->system().Send(victim, std::make_unique<EvPoison>());
  EventHandlePtr notice = inbox.Receive(testutil::WaitTimeout());
  ASSERT_NE(notice, nullptr);
  ASSERT_NE(notice->Get<EvTerminated>(), nullptr);
  EXPECT_EQ(notice->Get<EvTerminated>()->target(), victim);
  EXPECT_EQ(notice->Get<EvTerminated>()->reason(), TerminationReason::kStopped);

  two->Shutdown(absl::Seconds(5));
  notice = inbox.Receive(testutil::WaitTimeout());
  ASSERT_NE(notice, nullptr);
  ASSERT_NE(notice->Get<EvTerminated>(), nullptr);
  EXPECT_EQ(notice->Get<EvTerminated>()->target(), survivor);
  EXPECT_EQ(notice->Get<EvTerminated>()->reason(), TerminationReason::kNodeLeft)
      << "a node that shuts down says goodbye: it left, it was not lost";
  EXPECT_EQ(inbox.Receive(absl::Milliseconds(100)), nullptr);
}

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

  AskResult<EvIcData> reply =
      AskFuture<EvIcData>(one->system(), ServiceId("inc", 2), MakeData(7), testutil::WaitTimeout())
          .get();
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ((*reply)->record.seq(), 8u);

  std::vector<std::future<AskResult<EvIcData>>> many;
  for (uint64_t i = 0; i < 200; ++i) {
    many.push_back(AskFuture<EvIcData>(one->system(), ServiceId("inc", 2), MakeData(i),
                                       testutil::WaitTimeout()));
  }
  for (uint64_t i = 0; i < 200; ++i) {
    AskResult<EvIcData> got = many[i].get();
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ((*got)->record.seq(), i + 1);
  }

  reply = AskFuture<EvIcData>(one->system(), ServiceId("nobody", 2), MakeData(1),
                              testutil::WaitTimeout())
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
  reply =
      AskFuture<EvIcData>(one->system(), ServiceId("inc", 2), MakeData(1), absl::Seconds(20)).get();
  EXPECT_FALSE(reply.ok());
  EXPECT_TRUE(reply.status().code() == absl::StatusCode::kUnavailable ||
              reply.status().code() == absl::StatusCode::kDeadlineExceeded)
      << reply.status();
}

}  // namespace
}  // namespace troupe
